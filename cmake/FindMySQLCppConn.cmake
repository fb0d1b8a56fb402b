# Finds MySQL Connector/C++ 1.1 (the JDBC-style API; Debian: libmysqlcppconn-dev), which
# ships neither a CMake config nor a pkg-config file.
#
# Defines MySQLCppConn_FOUND and the imported target MySQLCppConn::MySQLCppConn.
find_path(MySQLCppConn_INCLUDE_DIR NAMES mysql_driver.h cppconn/driver.h)
find_library(MySQLCppConn_LIBRARY NAMES mysqlcppconn)

if(MySQLCppConn_INCLUDE_DIR AND EXISTS "${MySQLCppConn_INCLUDE_DIR}/cppconn/version_info.h")
  file(STRINGS "${MySQLCppConn_INCLUDE_DIR}/cppconn/version_info.h" _mcc_version_lines
       REGEX "#define MYCPPCONN_DM_(MAJOR|MINOR|PATCH)_VERSION")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*MYCPPCONN_DM_${_part}_VERSION[ \t]+([0-9]+).*" "\\1" _mcc_${_part} "${_mcc_version_lines}")
  endforeach()
  set(MySQLCppConn_VERSION "${_mcc_MAJOR}.${_mcc_MINOR}.${_mcc_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MySQLCppConn
  REQUIRED_VARS MySQLCppConn_LIBRARY MySQLCppConn_INCLUDE_DIR
  VERSION_VAR MySQLCppConn_VERSION)

if(MySQLCppConn_FOUND AND NOT TARGET MySQLCppConn::MySQLCppConn)
  add_library(MySQLCppConn::MySQLCppConn UNKNOWN IMPORTED)
  set_target_properties(MySQLCppConn::MySQLCppConn PROPERTIES
    IMPORTED_LOCATION "${MySQLCppConn_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MySQLCppConn_INCLUDE_DIR}")
endif()
mark_as_advanced(MySQLCppConn_INCLUDE_DIR MySQLCppConn_LIBRARY)
