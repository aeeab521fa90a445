# Text files (Lua scripts, SQL) compiled into the library as std::string_view
# constants, so they stay files that can be read, diffed and linted as what
# they are.
#
#   dlock_embed_text(<target> OUTPUT <name>.cpp HEADER <include> NAMESPACE <ns>
#                    FILES <ident>=<path> ...)
#
# defines `const std::string_view <ns>::<ident>` for each file (declared in
# HEADER, which the generated file includes). A line `--@include <file>` (a
# file in the same directory) is replaced by that file's text, recursively:
# a script made of shared pieces is still one file per piece. Rebuilt when
# any file of the directory changes.
if(CMAKE_SCRIPT_MODE_FILE)
  # cmake -DOUT=... -DHEADER=... -DNAMESPACE=... -DFILES=a=x|b=y -P this
  string(REPLACE "|" ";" FILES "${FILES}")
  set(out "// Generated from the files named below: edit those, not this.\n")
  string(APPEND out "#include \"${HEADER}\"\n\nnamespace ${NAMESPACE} {\n")
  foreach(pair IN LISTS FILES)
    string(REGEX MATCH "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$" _ "${pair}")
    set(ident "${CMAKE_MATCH_1}")
    set(path "${CMAKE_MATCH_2}")
    get_filename_component(dir "${path}" DIRECTORY)
    file(READ "${path}" text)
    foreach(_ RANGE 64)
      string(REGEX MATCH "--@include ([A-Za-z0-9_.]+)\n" line "${text}")
      if(NOT line)
        break()
      endif()
      file(READ "${dir}/${CMAKE_MATCH_1}" piece)
      string(REPLACE "${line}" "${piece}" text "${text}")
    endforeach()
    if(text MATCHES "--@include ")
      message(FATAL_ERROR "${path}: includes nested too deep")
    endif()
    if(text MATCHES "\\)dlock_embed\"")
      message(FATAL_ERROR "${path}: holds the raw string's delimiter")
    endif()
    get_filename_component(name "${path}" NAME)
    string(APPEND out "\n// ${name}\nextern const std::string_view ${ident};\n"
           "constinit const std::string_view ${ident} = R\"dlock_embed(${text})dlock_embed\";\n")
  endforeach()
  string(APPEND out "\n}  // namespace ${NAMESPACE}\n")
  file(WRITE "${OUT}.new" "${out}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.new" "${OUT}")
  file(REMOVE "${OUT}.new")
  return()
endif()

set(_dlock_embed_script "${CMAKE_CURRENT_LIST_FILE}")

function(dlock_embed_text target)
  cmake_parse_arguments(E "" "OUTPUT;HEADER;NAMESPACE" "FILES" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/embedded/${E_OUTPUT}")
  set(files "")
  set(deps "")
  foreach(pair IN LISTS E_FILES)
    string(REGEX MATCH "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$" _ "${pair}")
    set(path "${CMAKE_CURRENT_SOURCE_DIR}/${CMAKE_MATCH_2}")
    list(APPEND files "${CMAKE_MATCH_1}=${path}")
    get_filename_component(dir "${path}" DIRECTORY)
    get_filename_component(ext "${path}" EXT)
    file(GLOB siblings "${dir}/*${ext}")
    list(APPEND deps ${siblings})
  endforeach()
  list(REMOVE_DUPLICATES deps)
  string(REPLACE ";" "|" files_arg "${files}")
  add_custom_command(OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} "-DOUT=${out}" "-DHEADER=${E_HEADER}" "-DNAMESPACE=${E_NAMESPACE}"
            "-DFILES=${files_arg}" -P "${_dlock_embed_script}"
    DEPENDS ${deps} "${_dlock_embed_script}"
    COMMENT "Embedding ${E_OUTPUT}"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()
