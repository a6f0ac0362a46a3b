# The GPU launch runtime (src/runtime) and libtinyla_mgpu, MLIR's mgpu* ABI on it.
# Plain C++: the driver (libcuda.so.1 or libamdhip64.so) is loaded at run time.
add_library(tinyla_runtime OBJECT src/runtime/driver.cpp src/runtime/runtime.cpp)
add_library(tinyla_mgpu SHARED src/runtime/mgpu.cpp $<TARGET_OBJECTS:tinyla_runtime>)
add_library(tinyla::tinyla_mgpu ALIAS tinyla_mgpu)
foreach(t tinyla_runtime tinyla_mgpu)
  target_include_directories(${t} PRIVATE src)
  target_compile_options(${t} PRIVATE -Wall -Wextra)
  set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endforeach()
target_link_libraries(tinyla_mgpu PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
