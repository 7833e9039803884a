# Installation (`cmake --install`) and the Debian package (`cpack -G DEB`, `make package`).
#
# Components: "kerneld" (the daemon, kctl, the systemd unit, sysusers entry, settings file,
# docs, and every install() rule without a component, such as the C ABI library) and
# "kerneld-dev" (the C++ client library, its headers and the generated wire headers).
# Configure with -DCMAKE_INSTALL_PREFIX=/usr for a system install: the settings file then goes
# to /etc/default (GNUInstallDirs maps /usr's sysconfdir to /etc), and the unit's ExecStart names
# <prefix>/bin/kerneld.
include(GNUInstallDirs)

# ---- kerneld: the daemon and what runs it
install(TARGETS kerneld kctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kerneld)

# The unit as written in deploy/, pointing at the installed binary.
file(READ ${KD_ROOT}/deploy/systemd/kerneld.service KD_UNIT)
string(REPLACE "/usr/bin/kerneld" "${CMAKE_INSTALL_FULL_BINDIR}/kerneld" KD_UNIT "${KD_UNIT}")
file(WRITE ${CMAKE_BINARY_DIR}/deploy/kerneld.service "${KD_UNIT}")
install(FILES ${CMAKE_BINARY_DIR}/deploy/kerneld.service
        DESTINATION lib/systemd/system COMPONENT kerneld)
install(FILES ${KD_ROOT}/deploy/systemd/kerneld.sysusers.conf
        DESTINATION lib/sysusers.d RENAME kerneld.conf COMPONENT kerneld)
install(FILES ${KD_ROOT}/deploy/systemd/kerneld.default
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/default RENAME kerneld COMPONENT kerneld)
install(FILES ${KD_ROOT}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT kerneld)
install(FILES ${KD_ROOT}/client/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME README.client.md COMPONENT kerneld)
install(DIRECTORY ${KD_ROOT}/deploy/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/deploy
        COMPONENT kerneld PATTERN debian EXCLUDE)

# ---- kerneld-dev: the C++ client library
install(TARGETS kerneld_client kerneld_proto kerneld_submit_ring
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kerneld-dev)
# The client's smoke test against a running daemon (deploy/kubernetes/kerneld-trainer-example).
install(TARGETS kerneld_example RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kerneld-dev)
install(DIRECTORY ${KD_ROOT}/include/kerneld/client DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kerneld
        COMPONENT kerneld-dev)
install(FILES ${CMAKE_BINARY_DIR}/proto/kerneld/v1/kerneld.pb.h
              ${CMAKE_BINARY_DIR}/proto/kerneld/v1/kerneld.grpc.pb.h
              ${KD_ROOT}/proto/kerneld/v1/submit_ring.h ${KD_ROOT}/proto/kerneld/v1/kerneld.proto
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kerneld/v1 COMPONENT kerneld-dev)

# ---- The Debian package
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kerneld)
set(CPACK_PACKAGE_VENDOR "kerneld")
set(CPACK_PACKAGE_CONTACT "kerneld maintainers <kerneld@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "per-node FP8 kernel daemon for training (quantize, GEMM, pad)")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL kerneld kerneld-dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime dependencies from the binaries' shared libraries (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_KERNELD_PACKAGE_NAME kerneld)
set(CPACK_DEBIAN_KERNELD_PACKAGE_RECOMMENDS "systemd")
# The C ABI library (when built): a shlibs file and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_KERNELD-DEV_PACKAGE_NAME kerneld-dev)
set(CPACK_DEBIAN_KERNELD-DEV_PACKAGE_DEPENDS
    "kerneld (= ${PROJECT_VERSION}), libgrpc++-dev, libprotobuf-dev, libabsl-dev")
set(CPACK_DEBIAN_KERNELD-DEV_PACKAGE_SECTION libdevel)
# Maintainer scripts: create the user, reload systemd; /etc/default/kerneld is a conffile.
file(WRITE ${CMAKE_BINARY_DIR}/deploy/debian/conffiles "${CMAKE_INSTALL_FULL_SYSCONFDIR}/default/kerneld\n")
set(CPACK_DEBIAN_KERNELD_PACKAGE_CONTROL_EXTRA
    ${KD_ROOT}/deploy/debian/postinst ${KD_ROOT}/deploy/debian/prerm
    ${KD_ROOT}/deploy/debian/postrm ${KD_ROOT}/deploy/debian/triggers
    ${CMAKE_BINARY_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_KERNELD_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
