# Warnings, optimisation and sanitizers for C++ targets.
# RelWithDebInfo is -O3, except under ASan+UBSan: there -O1 (what ASan's
# authors advise), because the host kernels' instantiations (every type, op,
# algorithm and protocol) take twice as long to compile at -O3 with the
# sanitizers' instrumentation (one of them: 800 s against 376 s on the 2-core VM),
# which is most of the test command's time. There the debug information is
# line tables alone (-g1): enough for the sanitizers' reports to name every
# frame's function, file and line, and a third less compile time than -g
# (host_kernels_int.cc: 704 s against 467 s, 2026-11-28).
if(WEFT_SANITIZE STREQUAL "address")
  set(_weft_opt -O1 -g1)
else()
  set(_weft_opt -O3)
endif()
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter;-Wshadow=local>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo>>:${_weft_opt}>")

if(WEFT_SANITIZE STREQUAL "address")
  # -fno-sanitize=enum: nccl.h is a C API, where an enum parameter is an int
  # and any value may arrive; rejecting bad values with a clear error is our
  # job (and tested), not undefined behaviour to trap on.
  set(_weft_san -fsanitize=address,undefined -fno-sanitize=enum -fno-omit-frame-pointer
                -fno-sanitize-recover=undefined)
elseif(WEFT_SANITIZE STREQUAL "thread")
  set(_weft_san -fsanitize=thread)
elseif(NOT WEFT_SANITIZE STREQUAL "")
  message(FATAL_ERROR "WEFT_SANITIZE must be empty, 'address' or 'thread' (got '${WEFT_SANITIZE}')")
endif()
if(_weft_san)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_weft_san}>")
  add_link_options(${_weft_san})
endif()

# Device code's optimisation in NVVM (cicc), for builds that only check that
# the kernels compile: scripts/test.sh sets 1 where no GPU will run them.
# NVVM's default (3) inlines every call into each kernel and is nearly all
# of a kernel unit's compile time; at 1 the same front end checks every
# line and every instantiation, the same kernels come out (as PTX with
# calls), in about a sixth of the time (2026-11-28, the 2-core VM: all CUDA
# units 1000 core-seconds against 166; kernels_half.cu 132 s against 10).
# Never for a library that runs on a GPU: its kernels would be slower.
set(WEFT_CUDA_NVVM_OPT "" CACHE STRING "NVVM optimisation level of device code: empty (nvcc's default) or 0-3")
if(NOT WEFT_CUDA_NVVM_OPT STREQUAL "")
  if(NOT WEFT_CUDA_NVVM_OPT MATCHES "^[0-3]$")
    message(FATAL_ERROR "WEFT_CUDA_NVVM_OPT must be empty or 0-3 (got '${WEFT_CUDA_NVVM_OPT}')")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcicc -O${WEFT_CUDA_NVVM_OPT}>")
endif()
