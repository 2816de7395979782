# Finds NCCL's header and library for the nccl plugin (the NCCL backend of runtime/dist), in this
# order: NCCL_ROOT (variable or environment), beside the CUDA toolkit, then the NVIDIA wheels of
# the machine's Python (site-packages/nvidia/nccl/{include,lib}, or nvidia/<any>/ for other
# layouts). A wheel ships libnccl.so.2 with no libnccl.so link, so the versioned name is searched
# too; linking the full path records the soname libnccl.so.2, which the plugin loader
# (runtime/cuda/loader.c) preloads at run time from wherever it finds it.
#   in:  CUDAToolkit_INCLUDE_DIRS, CUDAToolkit_LIBRARY_DIR (optional),
#        LLMLAB_PYTHON_SITE (site-packages directories; default: asked of python3)
#   out: NCCL_INCLUDE_DIR, NCCL_LIBRARY (NOTFOUND when absent), LLMLAB_NCCL_FROM (a word for the log)
# tests/cmake/test_find_nccl.sh configures a tiny project that includes this file against a
# wheel-shaped directory.
if(NOT DEFINED LLMLAB_PYTHON_SITE)
  find_program(LLMLAB_PYTHON3 python3)
  set(_sites "")
  if(LLMLAB_PYTHON3)
    execute_process(COMMAND ${LLMLAB_PYTHON3} -c
      "import site,sys; print(';'.join([p for p in sys.path if p.endswith('-packages')] + [site.getusersitepackages()]))"
      OUTPUT_VARIABLE _sites OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 20)
  endif()
  set(LLMLAB_PYTHON_SITE "${_sites}" CACHE STRING "site-packages directories searched for the NVIDIA NCCL wheel")
endif()

set(_nccl_inc_hints "")
set(_nccl_lib_hints "")
foreach(root ${NCCL_ROOT} $ENV{NCCL_ROOT})
  list(APPEND _nccl_inc_hints ${root}/include)
  list(APPEND _nccl_lib_hints ${root}/lib ${root}/lib64)
endforeach()
list(APPEND _nccl_inc_hints ${CUDAToolkit_INCLUDE_DIRS})
list(APPEND _nccl_lib_hints ${CUDAToolkit_LIBRARY_DIR})
foreach(site ${LLMLAB_PYTHON_SITE})
  file(GLOB _wheel_dirs LIST_DIRECTORIES true ${site}/nvidia/nccl ${site}/nvidia/*)
  list(REMOVE_DUPLICATES _wheel_dirs)
  foreach(d ${_wheel_dirs})
    if(EXISTS ${d}/include/nccl.h)
      list(APPEND _nccl_inc_hints ${d}/include)
    endif()
    if(EXISTS ${d}/lib)
      list(APPEND _nccl_lib_hints ${d}/lib)
    endif()
  endforeach()
endforeach()

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_inc_hints})
# libnccl.so (a development link) or the wheel's libnccl.so.2
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_lib_hints})
set(LLMLAB_NCCL_FROM "")
if(NCCL_LIBRARY)
  set(LLMLAB_NCCL_FROM "the toolkit or the system")
  foreach(site ${LLMLAB_PYTHON_SITE})
    string(FIND "${NCCL_LIBRARY}" "${site}/nvidia/" _at)
    if(_at EQUAL 0)
      set(LLMLAB_NCCL_FROM "a Python wheel")
    endif()
  endforeach()
endif()
