# The GPU backend for NVIDIA (libtinyla_cuda; kernels compiled by nvcc) and/or
# AMD (libtinyla_hip; kernels compiled by clang -x hip). Both export
# tinyla_gpu.h and link libtinyla (tinyla_status_string).
#
#   -DTINYLA_CUDA=ON [-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc] [-DTINYLA_CUDA_ARCHITECTURES="80;90"]
#   -DTINYLA_HIP=ON  [-DTINYLA_HIP_ARCHITECTURES="gfx90a;gfx942"] [-DTINYLA_HIP_CLANG=...]
#                    [-DTINYLA_HIP_PATH=/usr] [-DTINYLA_ROCM_DEVICE_LIBS=<dir of ocml.bc, ockl.bc, oclc_*.bc>]
option(TINYLA_CUDA "Build libtinyla_cuda, the GPU backend for NVIDIA GPUs" OFF)
option(TINYLA_HIP "Build libtinyla_hip, the GPU backend for AMD GPUs" OFF)
set(TINYLA_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures (sm_80 = A100, sm_90 = H100; PTX of the oldest), or native")
set(TINYLA_HIP_ARCHITECTURES "gfx90a;gfx942" CACHE STRING "AMD GPU architectures (gfx90a = MI200, gfx942 = MI300)")

# Each library is the host side, src/gpu/backend.cpp (plain C++ on the launch
# runtime: the driver is loaded with dlopen at the first launch, so no vendor
# library is linked), plus a device image of src/gpu/kernels.cu built into the
# library: a CUDA fatbin (nvcc --fatbin: machine code per architecture, and
# PTX of the oldest for the GPUs after them) or a clang offload bundle of AMD
# code objects. Device compiles contract no a*b+c into fma beyond the kernels'
# explicit fma calls, so the bits match the CPU's.
set(tinyla_gpu_defs TINYLA_KERNEL_NS=gpu_kernels)
list(TRANSFORM tinyla_gpu_defs PREPEND -D OUTPUT_VARIABLE tinyla_gpu_def_flags)
set(tinyla_gpu_includes -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include)
set(tinyla_gpu_kernels_source "${PROJECT_SOURCE_DIR}/src/gpu/kernels.cu")

# tinyla_gpu_backend(<library> <platform: cuda|rocm> <device image> <what it holds>)
function(tinyla_gpu_backend name platform image kind)
  set(TINYLA_GPU_IMAGE "${image}")
  set(TINYLA_GPU_IMAGE_KIND "${kind}")
  set(image_source "${CMAKE_CURRENT_BINARY_DIR}/${name}_image.cpp")
  configure_file(${PROJECT_SOURCE_DIR}/src/gpu/image.cpp.in "${image_source}" @ONLY)
  set_source_files_properties("${image_source}" PROPERTIES OBJECT_DEPENDS "${image}")
  # The image as a target of its own, which depends on nothing else: scripts/test
  # builds it alone, while the Python package installs.
  add_custom_target(${name}_image DEPENDS "${image}")
  add_library(${name} SHARED src/gpu/backend.cpp "${image_source}" $<TARGET_OBJECTS:tinyla_runtime>)
  add_dependencies(${name} ${name}_image)
  target_compile_definitions(${name} PRIVATE ${tinyla_gpu_defs} TINYLA_GPU_PLATFORM_NAME="${platform}")
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  set(tinyla_gpu_libraries ${tinyla_gpu_libraries} ${name} PARENT_SCOPE)
endfunction()

if(TINYLA_CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TINYLA_NVCC "${CMAKE_CUDA_COMPILER}" CACHE FILEPATH "nvcc")
  else()
    find_program(TINYLA_NVCC nvcc PATHS /usr/local/cuda/bin REQUIRED)
  endif()
  get_filename_component(nvcc_bin "${TINYLA_NVCC}" DIRECTORY)
  get_filename_component(CUDAToolkit_ROOT "${nvcc_bin}" DIRECTORY CACHE)  # the GPU tests' CUDA runtime
  if(TINYLA_CUDA_ARCHITECTURES STREQUAL "native")  # the GPUs of this machine (nvcc finds them)
    set(gencode -arch=native)
  else()
    # One PTX, for the oldest architecture, and machine code for each from it: the
    # kernels use nothing architecture-specific (nvcc 13's PTX for compute_80 and
    # compute_90 differ in the .target line only, and ptxas made byte-identical
    # sm_90 code from either), and each further PTX would cost a front-end pass
    # (cicc: about a minute). That PTX is also embedded, for the GPUs after them.
    set(archs ${TINYLA_CUDA_ARCHITECTURES})
    list(SORT archs COMPARE NATURAL)
    list(GET archs 0 oldest)
    list(TRANSFORM archs PREPEND sm_)
    list(JOIN archs "," codes)
    set(gencode -gencode "arch=compute_${oldest},code=[${codes},compute_${oldest}]")
  endif()
  set(fatbin "${CMAKE_CURRENT_BINARY_DIR}/tinyla_cuda_kernels.fatbin")
  # relaxed-constexpr: std::numeric_limits in device code; 1675: the kernels'
  # GCC unroll pragmas (for the CPU build) are not nvcc's. --threads 0: the
  # architectures' ptxas runs in parallel (each takes a minute).
  add_custom_command(OUTPUT "${fatbin}"
    COMMAND "${TINYLA_NVCC}" --fatbin --threads 0 -std=c++20 -O3 --expt-relaxed-constexpr -fmad=false -diag-suppress=1675
            ${gencode} ${tinyla_gpu_def_flags} ${tinyla_gpu_includes}
            -MD -MF "${fatbin}.d" "${tinyla_gpu_kernels_source}" -o "${fatbin}"
    DEPFILE "${fatbin}.d" DEPENDS "${tinyla_gpu_kernels_source}"
    COMMENT "Compiling the CUDA kernels for ${TINYLA_CUDA_ARCHITECTURES}" VERBATIM)
  tinyla_gpu_backend(tinyla_cuda cuda "${fatbin}" "a CUDA fatbin")
endif()

if(TINYLA_HIP)
  find_program(TINYLA_HIP_CLANG NAMES clang++ PATHS /usr/lib/llvm-22/bin NO_DEFAULT_PATH)
  find_program(TINYLA_HIP_CLANG NAMES clang++-22 clang++)
  find_library(tinyla_amdhip64 amdhip64 REQUIRED)  # the GPU tests' HIP runtime
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
  # A per-thread matrix is a private array, which clang promotes to registers
  # only up to a number of VGPRs: under clang 22's default, float64 n = 6 and 8
  # and float32 n = 6..8 stayed in scratch (gfx942 resource remarks); with 64,
  # none of them. Only where this clang knows the option.
  set(promote_flag -mllvm -amdgpu-promote-alloca-to-vector-max-regs=64)
  execute_process(COMMAND "${TINYLA_HIP_CLANG}" ${promote_flag} -x c -E /dev/null -o /dev/null
                  RESULT_VARIABLE promote_rc OUTPUT_QUIET ERROR_QUIET)
  if(promote_rc EQUAL 0)
    list(APPEND arch_flags ${promote_flag})
  endif()
  # No SLP vectorizer: it stores slices of a per-thread complex64 matrix as pairs of
  # floats beside the whole-element (i64) copies and single-float loads of the row
  # swaps, mixed accesses that SROA and the promotion to registers give up on (n = 7, 8:
  # 48-128 bytes of scratch, 57-178 scratch loads and stores per matrix). Without it: no
  # scratch in any kernel, fewer VGPRs in 48 of the 112 launched, more in 10 (docs/gpu.md);
  # the packed float32 math it formed should be worth nothing to kernels bound by memory.
  list(APPEND arch_flags -fno-slp-vectorize)
  set(bundle "${CMAKE_CURRENT_BINARY_DIR}/tinyla_hip_kernels.hipfb")
  # clang writes no dependency file for a device-only bundle: what kernels.cu includes.
  file(GLOB kernel_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/gpu/*.hpp ${PROJECT_SOURCE_DIR}/src/kernels/*.hpp
       ${PROJECT_SOURCE_DIR}/src/job.hpp ${PROJECT_SOURCE_DIR}/include/tinyla/tinyla.h)
  # -mcode-object-version=5: the ABI of the device libraries above. -O2: the same
  # registers, scratch and loads in flight as -O3 (gfx942: 11 of 144 kernels differ
  # by a few VGPRs, most fewer; scripts/gpu-report's workload table unchanged) in 85 s
  # per architecture instead of 115.
  # __AMDGCN_WAVEFRONT_SIZE: HIP 5 headers read it and clang 22 no longer
  # defines it; 64 for CDNA (gfx9*), the only family the defaults name.
  add_custom_command(OUTPUT "${bundle}"
    COMMAND "${TINYLA_HIP_CLANG}" -x hip ${arch_flags} --offload-device-only --gpu-bundle-output -std=c++20 -O2
            -ffp-contract=off --hip-path=${TINYLA_HIP_PATH} --rocm-device-lib-path=${bitcode} -mcode-object-version=5
            -D__AMDGCN_WAVEFRONT_SIZE=64 -DTINYLA_GPU_HIP ${tinyla_gpu_def_flags} -Wno-pass-failed
            ${tinyla_gpu_includes} -c "${tinyla_gpu_kernels_source}" -o "${bundle}"
    DEPENDS "${tinyla_gpu_kernels_source}" ${kernel_headers}
    COMMENT "Compiling the HIP kernels for ${TINYLA_HIP_ARCHITECTURES}" VERBATIM)
  tinyla_gpu_backend(tinyla_hip rocm "${bundle}" "a clang offload bundle of AMD code objects")
endif()

foreach(lib IN LISTS tinyla_gpu_libraries)
  add_library(tinyla::${lib} ALIAS ${lib})
  target_include_directories(${lib} PRIVATE src PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${lib} PUBLIC tinyla)
  target_compile_features(${lib} PUBLIC cxx_std_20)
endforeach()

# The launch plans of the QMC workload's ops (host code), for scripts/gpu-report.
if(tinyla_gpu_libraries)
  add_executable(tinyla_gpu_plans bench/gpu_plans.cpp)
  target_include_directories(tinyla_gpu_plans PRIVATE src include)
  target_compile_definitions(tinyla_gpu_plans PRIVATE ${tinyla_gpu_defs})
  target_compile_features(tinyla_gpu_plans PRIVATE cxx_std_20)
endif()
