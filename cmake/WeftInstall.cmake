# Install tree: include/{nccl.h,weft.h}, lib/{libweft.so*,libnccl.so,libnccl.so.2}.
include(GNUInstallDirs)
install(TARGETS weft LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/nccl.h ${PROJECT_SOURCE_DIR}/include/weft.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(CODE "
  set(_lib \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
  execute_process(COMMAND ${CMAKE_COMMAND} -E create_symlink libweft.so.${PROJECT_VERSION_MAJOR} \"\${_lib}/libnccl.so.2\")
  execute_process(COMMAND ${CMAKE_COMMAND} -E create_symlink libnccl.so.2 \"\${_lib}/libnccl.so\")
  message(STATUS \"Installing: \${_lib}/libnccl.so.2 -> libweft.so.${PROJECT_VERSION_MAJOR}\")
")
install(TARGETS weft-demo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
