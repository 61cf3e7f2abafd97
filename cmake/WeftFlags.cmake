# Warnings, optimisation and sanitizers for C++ targets.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter;-Wshadow=local>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo>>:-O3>")

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
