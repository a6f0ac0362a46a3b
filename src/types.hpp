// The four element types, mapped once: the C API's dtype (in its suffix order
// f32, f64, c64, c128), the C++ storage type, its real type, and its name.
// Whatever switches on a dtype or names one goes through here; the kernels'
// element for a storage type is kernel_element in kernels/lanes.hpp.
#pragma once

#include <complex>
#include <type_traits>
#include <utility>

namespace tinyla {

enum class dtype : int { f32, f64, c64, c128 };
inline constexpr int dtype_count = 4;

template <class T, class Real, dtype Id, const char* Name> struct element_info {
  using type = T;     // the storage type (the C API's element; complex as std::complex)
  using real = Real;  // the type of its parts and of logabsdet
  static constexpr dtype id = Id;
  static constexpr int reals = sizeof(T) / sizeof(Real);  // 1, or 2 for complex
  static constexpr const char* name = Name;
};
inline constexpr char f32_name[] = "f32", f64_name[] = "f64", c64_name[] = "c64", c128_name[] = "c128";

template <dtype D> struct dtype_info;
template <> struct dtype_info<dtype::f32> : element_info<float, float, dtype::f32, f32_name> {};
template <> struct dtype_info<dtype::f64> : element_info<double, double, dtype::f64, f64_name> {};
template <> struct dtype_info<dtype::c64> : element_info<std::complex<float>, float, dtype::c64, c64_name> {};
template <> struct dtype_info<dtype::c128> : element_info<std::complex<double>, double, dtype::c128, c128_name> {};

// The same, looked up by storage type.
template <class T> struct type_info;
template <> struct type_info<float> : dtype_info<dtype::f32> {};
template <> struct type_info<double> : dtype_info<dtype::f64> {};
template <> struct type_info<std::complex<float>> : dtype_info<dtype::c64> {};
template <> struct type_info<std::complex<double>> : dtype_info<dtype::c128> {};

template <class T> inline constexpr dtype dtype_of = type_info<T>::id;
template <class T> using storage_real_t = typename type_info<T>::real;

// f(dtype_info<t>{}) for a dtype known only at run time.
template <class F> constexpr decltype(auto) with_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: return std::forward<F>(f)(dtype_info<dtype::f32>{});
    case dtype::f64: return std::forward<F>(f)(dtype_info<dtype::f64>{});
    case dtype::c64: return std::forward<F>(f)(dtype_info<dtype::c64>{});
    case dtype::c128: break;
  }
  return std::forward<F>(f)(dtype_info<dtype::c128>{});
}

constexpr const char* dtype_name(dtype t) {
  return with_dtype(t, [](auto info) { return decltype(info)::name; });
}
constexpr int element_bytes(dtype t) {
  return with_dtype(t, [](auto info) { return int(sizeof(typename decltype(info)::type)); });
}

}  // namespace tinyla
