# Install layout and the Debian package (CPack DEB). Included at the end of
# the top-level CMakeLists.txt, after `install(TARGETS spate ...)`.
#
# Contract:
# - `cmake --install BUILD --prefix P` installs P/bin/spate, the units in
#   P/lib/systemd/system, the example config, the README and docs/. The config goes
#   to /etc/spate/spate.conf when P is /usr (the package), else to
#   P/etc/spate/spate.conf (an existing spate.conf is kept; the example then
#   goes to spate.conf.example); the unit's ExecStart= and --config paths are
#   rewritten to match P, so an installed tree is self-consistent.
# - `cd BUILD && cpack -G DEB` builds spate_<version>_<arch>.deb with prefix
#   /usr, /etc/spate/spate.conf as a conffile, Depends from dpkg-shlibdeps,
#   a sysusers.d entry for the "spate" system user (created by postinst when
#   systemd-sysusers exists; otherwise the unit's DynamicUser= allocates one).
#   The package does not enable or start anything: the model must be put in
#   place first (docs/operations.md, "The systemd service").

include_guard(GLOBAL)

set(SPATE_PACKAGING_DIR "${CMAKE_BINARY_DIR}/packaging")

# sysusers.d entry (shipped) and the maintainer scripts (control archive).
file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/sysusers-spate.conf" @ONLY CONTENT [[
# spate service user; its group may read secrets in /etc/spate (mode 0640).
u spate - "spate LLM inference server" /var/lib/spate
]])

file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/deb/conffiles" @ONLY CONTENT [[
/etc/spate/spate.conf
]])

# Maintainer scripts. They honour DPKG_ROOT (dpkg --root with chrootless
# scripts) and touch systemd only when it is running.
file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/deb/postinst" @ONLY CONTENT [[
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers ${DPKG_ROOT:+--root="$DPKG_ROOT"} spate.conf || true
  fi
  if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
  fi
fi
exit 0
]])

file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/deb/prerm" @ONLY CONTENT [[
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
  systemctl stop spate.socket spate.service >/dev/null 2>&1 || true
fi
exit 0
]])

file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/deb/postrm" @ONLY CONTENT [[
#!/bin/sh
set -e
if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
]])

# Install-time script: runs inside cmake_install.cmake, where
# CMAKE_INSTALL_PREFIX is the final prefix (cpack DEB: /usr with DESTDIR set).
file(CONFIGURE OUTPUT "${SPATE_PACKAGING_DIR}/install_service_files.cmake" @ONLY CONTENT [[
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_spate_etc "/etc/spate")
else()
  set(_spate_etc "${CMAKE_INSTALL_PREFIX}/etc/spate")
endif()
set(_spate_stage "@SPATE_PACKAGING_DIR@/stage")
file(MAKE_DIRECTORY "${_spate_stage}")
file(READ "@CMAKE_SOURCE_DIR@/systemd/spate.service" _spate_unit)
string(REPLACE "/usr/bin/spate " "${CMAKE_INSTALL_PREFIX}/bin/spate " _spate_unit "${_spate_unit}")
string(REPLACE "--config /etc/spate/spate.conf" "--config ${_spate_etc}/spate.conf" _spate_unit "${_spate_unit}")
file(WRITE "${_spate_stage}/spate.service" "${_spate_unit}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${_spate_stage}/spate.service" "@CMAKE_SOURCE_DIR@/systemd/spate.socket")
# Never overwrite an operator's config: a second install leaves it alone and
# puts the new example next to it.
set(_spate_conf_name spate.conf)
if(EXISTS "$ENV{DESTDIR}${_spate_etc}/spate.conf")
  set(_spate_conf_name spate.conf.example)
  message(STATUS "Keeping $ENV{DESTDIR}${_spate_etc}/spate.conf; the example goes to spate.conf.example")
endif()
file(INSTALL DESTINATION "${_spate_etc}" TYPE FILE RENAME "${_spate_conf_name}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "@CMAKE_SOURCE_DIR@/etc/spate.conf")
]])
install(SCRIPT "${SPATE_PACKAGING_DIR}/install_service_files.cmake")
install(FILES "${SPATE_PACKAGING_DIR}/sysusers-spate.conf" DESTINATION lib/sysusers.d RENAME spate.conf)
install(FILES "${CMAKE_SOURCE_DIR}/README.md" DESTINATION share/doc/spate)
install(DIRECTORY "${CMAKE_SOURCE_DIR}/docs/" DESTINATION share/doc/spate/docs)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spate)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "spate")
set(CPACK_PACKAGE_CONTACT "spate maintainers <spate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "OpenAI-compatible LLM inference server for CPUs")
# The summary becomes the synopsis line of the Debian description.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "spate serves GGUF models over an OpenAI-compatible HTTP/WebSocket API "
    "with continuous batching, a paged KV cache and AVX2 kernels. It ships a "
    "systemd service (Type=notify, watchdog, graceful drain, reload on SIGHUP) "
    "and a socket unit.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # Debian ships stripped binaries
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # needs dpkg-shlibdeps (dpkg-dev)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS systemd)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${SPATE_PACKAGING_DIR}/deb/conffiles;${SPATE_PACKAGING_DIR}/deb/postinst;${SPATE_PACKAGING_DIR}/deb/prerm;${SPATE_PACKAGING_DIR}/deb/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
