// Reading the stand-in driver's counts (stand_in_driver.cpp) in the tests.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

namespace stand_in {

// "key=value key=value ..." -> map.
inline std::map<std::string, long> parse(const std::string& line) {
  std::map<std::string, long> m;
  std::istringstream in(line);
  std::string kv;
  while (in >> kv)
    if (auto eq = kv.find('='); eq != std::string::npos) m[kv.substr(0, eq)] = std::atol(kv.c_str() + eq + 1);
  return m;
}

// The counts of the stand-in this process loaded as its driver (TINYLA_GPU_DRIVER); empty if none is loaded.
inline std::map<std::string, long> counts() {
  const char* path = std::getenv("TINYLA_GPU_DRIVER");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  auto report = lib ? reinterpret_cast<const char* (*)()>(dlsym(lib, "tinyla_stand_in_report")) : nullptr;
  std::map<std::string, long> m = report ? parse(report()) : std::map<std::string, long>{};
  if (lib) dlclose(lib);  // drops the reference RTLD_NOLOAD took
  return m;
}

}  // namespace stand_in
