# The GPU backend: src/gpu/backend.cu compiled for NVIDIA (libtinyla_cuda, nvcc)
# and/or AMD (libtinyla_hip, clang -x hip). Both export tinyla_gpu.h and link
# libtinyla (tinyla_status_string).
#
#   -DTINYLA_CUDA=ON [-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc] [-DTINYLA_CUDA_ARCHITECTURES="80;90"]
#   -DTINYLA_HIP=ON  [-DTINYLA_HIP_ARCHITECTURES="gfx90a;gfx942"] [-DTINYLA_HIP_CLANG=...]
#                    [-DTINYLA_HIP_PATH=/usr] [-DTINYLA_ROCM_DEVICE_LIBS=<dir of ocml.bc, ockl.bc, oclc_*.bc>]
option(TINYLA_CUDA "Build libtinyla_cuda, the GPU backend for NVIDIA GPUs" OFF)
option(TINYLA_HIP "Build libtinyla_hip, the GPU backend for AMD GPUs" OFF)
set(TINYLA_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures (sm_80 = A100, sm_90 = H100)")
set(TINYLA_HIP_ARCHITECTURES "gfx90a;gfx942" CACHE STRING "AMD GPU architectures (gfx90a = MI200, gfx942 = MI300)")

# Every GPU compile: the kernels' own namespace; no contraction of a*b+c into
# fma beyond the kernels' explicit fma calls, so the bits match the CPU's.
set(tinyla_gpu_defs TINYLA_KERNEL_NS=gpu_kernels)

if(TINYLA_CUDA)
  enable_language(CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag (the C++ targets' cxx_std_20 asks for it).
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
  add_library(tinyla_cuda SHARED src/gpu/backend.cu)
  set_target_properties(tinyla_cuda PROPERTIES CUDA_ARCHITECTURES "${TINYLA_CUDA_ARCHITECTURES}"
    CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF CUDA_RUNTIME_LIBRARY Static
    CUDA_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_compile_definitions(tinyla_cuda PRIVATE ${tinyla_gpu_defs})
  # relaxed-constexpr: std::numeric_limits in device code; 1675: the kernels'
  # GCC unroll pragmas (for the CPU build) are not nvcc's.
  target_compile_options(tinyla_cuda PRIVATE --expt-relaxed-constexpr -fmad=false -diag-suppress=1675)
  list(APPEND tinyla_gpu_libraries tinyla_cuda)
endif()

if(TINYLA_HIP)
  find_program(TINYLA_HIP_CLANG NAMES clang++ PATHS /usr/lib/llvm-22/bin NO_DEFAULT_PATH)
  find_program(TINYLA_HIP_CLANG NAMES clang++-22 clang++)
  find_library(tinyla_amdhip64 amdhip64 REQUIRED)
  set(TINYLA_HIP_PATH /usr CACHE PATH "HIP headers' prefix (include/hip)")
  set(TINYLA_ROCM_DEVICE_LIBS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode CACHE PATH
      "ROCm device libraries (ocml.bc, ockl.bc, oclc_*.bc)")
  if(NOT TINYLA_HIP_CLANG OR NOT EXISTS "${TINYLA_ROCM_DEVICE_LIBS}/ocml.bc")
    message(FATAL_ERROR "TINYLA_HIP needs clang with AMDGPU support (TINYLA_HIP_CLANG: ${TINYLA_HIP_CLANG}) and the "
                        "ROCm device libraries (TINYLA_ROCM_DEVICE_LIBS: ${TINYLA_ROCM_DEVICE_LIBS}); on Debian 12: "
                        "apt-get install clang-22 lld-22 clang-tools-22 libamdhip64-dev rocm-device-libs")
  endif()
  # clang picks oclc_isa_version_<N>.bc per architecture from one folder. Debian's
  # ROCm 5.2 libraries predate gfx942 (MI300): it gets gfx940's, whose only
  # difference is the ISA version constant a few ockl routines read (tinyla's
  # kernels call none of them).
  set(bitcode "${CMAKE_CURRENT_BINARY_DIR}/rocm-bitcode")
  file(MAKE_DIRECTORY "${bitcode}")
  file(GLOB libs "${TINYLA_ROCM_DEVICE_LIBS}/*.bc")
  foreach(lib IN LISTS libs)
    get_filename_component(name "${lib}" NAME)
    file(CREATE_LINK "${lib}" "${bitcode}/${name}" SYMBOLIC)
  endforeach()
  if(NOT EXISTS "${bitcode}/oclc_isa_version_942.bc" AND EXISTS "${bitcode}/oclc_isa_version_940.bc")
    file(CREATE_LINK "${bitcode}/oclc_isa_version_940.bc" "${bitcode}/oclc_isa_version_942.bc" SYMBOLIC)
  endif()
  set(arch_flags)
  foreach(arch IN LISTS TINYLA_HIP_ARCHITECTURES)
    list(APPEND arch_flags --offload-arch=${arch})
  endforeach()
  set(obj "${CMAKE_CURRENT_BINARY_DIR}/backend_hip.o")
  list(TRANSFORM tinyla_gpu_defs PREPEND -D OUTPUT_VARIABLE defs)
  # -mcode-object-version=5: the ABI of the device libraries above.
  # __AMDGCN_WAVEFRONT_SIZE: HIP 5 headers read it and clang 22 no longer
  # defines it; 64 for CDNA (gfx9*), the only family the defaults name.
  add_custom_command(OUTPUT "${obj}"
    COMMAND "${TINYLA_HIP_CLANG}" -x hip ${arch_flags} -std=c++20 -O3 -fPIC -ffp-contract=off
            --hip-path=${TINYLA_HIP_PATH} --rocm-device-lib-path=${bitcode} -mcode-object-version=5
            -D__AMDGCN_WAVEFRONT_SIZE=64 -DTINYLA_GPU_HIP ${defs} -Wno-pass-failed -fvisibility=hidden
            -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include
            -MD -MF "${obj}.d" -c "${PROJECT_SOURCE_DIR}/src/gpu/backend.cu" -o "${obj}"
    DEPFILE "${obj}.d" DEPENDS "${PROJECT_SOURCE_DIR}/src/gpu/backend.cu"
    COMMENT "Compiling the HIP backend for ${TINYLA_HIP_ARCHITECTURES}" VERBATIM)
  add_library(tinyla_hip SHARED "${obj}")
  set_target_properties(tinyla_hip PROPERTIES LINKER_LANGUAGE CXX)
  target_link_libraries(tinyla_hip PRIVATE "${tinyla_amdhip64}")
  list(APPEND tinyla_gpu_libraries tinyla_hip)
endif()

foreach(lib IN LISTS tinyla_gpu_libraries)
  add_library(tinyla::${lib} ALIAS ${lib})
  target_include_directories(${lib} PRIVATE src PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${lib} PUBLIC tinyla)
  target_compile_features(${lib} PUBLIC cxx_std_20)
endforeach()
