# The GPU launch runtime (src/runtime: the GPU backends' and libtinyla_mgpu's),
# and libtinyla_mgpu (src/mgpu), MLIR's mgpu* ABI on it (not part of the wheel). Plain
# C++: the driver (libcuda.so.1 or libamdhip64.so) is loaded at run time.
add_library(tinyla_runtime OBJECT src/runtime/driver.cpp src/runtime/runtime.cpp)
set(tinyla_runtime_targets tinyla_runtime)
if(NOT TINYLA_BUILD_PYTHON)
  # Its own build of the runtime, optimized with mgpu.cpp across files where the
  # compiler can: each mgpu* call then inlines the runtime's hot path instead of
  # calling through it (host time per launch on the stand-in driver: 62 -> 49 ns).
  add_library(tinyla_mgpu SHARED src/mgpu/mgpu.cpp src/runtime/driver.cpp src/runtime/runtime.cpp)
  include(CheckIPOSupported)
  check_ipo_supported(RESULT tinyla_ipo_supported OUTPUT tinyla_ipo_output LANGUAGES CXX)
  if(tinyla_ipo_supported)
    set_target_properties(tinyla_mgpu PROPERTIES INTERPROCEDURAL_OPTIMIZATION ON)
  endif()
  add_library(tinyla::tinyla_mgpu ALIAS tinyla_mgpu)
  target_link_libraries(tinyla_mgpu PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  list(APPEND tinyla_runtime_targets tinyla_mgpu)
endif()
foreach(t IN LISTS tinyla_runtime_targets)
  target_include_directories(${t} PRIVATE src)
  target_compile_options(${t} PRIVATE -Wall -Wextra)
  set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endforeach()
