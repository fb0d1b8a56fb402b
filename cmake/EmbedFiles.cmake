# dblock_embed(OUT <generated .cpp> SCRIPT <cmake -P script> DIR <source dir> GLOB <pattern>
#              COMMENT <text>): generates OUT from the files under DIR matching GLOB by running
# SCRIPT (cmake/EmbedMigrations.cmake, cmake/EmbedLua.cmake), so that the library carries them
# and works from anywhere. The list of files is a dependency too (rewritten only when it
# changes), so that a file removed or renamed is embedded anew and not left in the library.
function(dblock_embed)
  cmake_parse_arguments(E "" "OUT;SCRIPT;DIR;GLOB;COMMENT" "" ${ARGN})
  file(GLOB files CONFIGURE_DEPENDS ${E_DIR}/${E_GLOB})
  get_filename_component(name ${E_OUT} NAME_WE)
  set(list ${CMAKE_CURRENT_BINARY_DIR}/generated/${name}_files.txt)
  string(REPLACE ";" "\n" names "${files}")
  file(WRITE ${list}.new "${names}\n")
  configure_file(${list}.new ${list} COPYONLY)
  add_custom_command(
    OUTPUT ${E_OUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${E_OUT} -DDIR=${E_DIR} -P ${E_SCRIPT}
    DEPENDS ${files} ${list} ${E_SCRIPT}
    COMMENT "${E_COMMENT}")
endfunction()
