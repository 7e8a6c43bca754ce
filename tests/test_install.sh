#!/usr/bin/env bash
# test_install.sh — `make install` into a temporary prefix, then programs
# built against it as a user would: tests/install/consumer.c as C (C11) and
# as C++ (C++17), with the shared and the static library, through pkg-config
# and through CMake's find_package; tests/install/consumer_hf.c against the
# checkpoint library likewise; the README's quickstart as C and C++ with
# gcc and clang; the SONAMEs and what each program needs
# at run time; DESTDIR staging, and the staged tree moved elsewhere still
# found by pkg-config and find_package; `make uninstall` leaves nothing behind.
# Sanitizer builds (make asan) skip it: their objects need the sanitizer
# runtimes, which an installed library's users do not link.
SUITE=install
source "$(dirname "$0")/shell_common.sh"
if [ "$(basename "$BUILD")" != build ]; then
    echo "SKIPPED install: $BUILD is a sanitizer build"; summary
fi
for tool in cc c++ cmake pkg-config readelf; do
    command -v $tool >/dev/null || { fail "$tool is not installed (scripts/install-deps.sh)"; summary; }
done
P=$TMP/prefix
if ! make -s BUILD="$BUILD" PREFIX="$P" install >"$TMP/log" 2>&1; then
    fail "make install: $(tail -5 "$TMP/log")"; summary
fi
for f in bin/ropeattn include/ropeattn.h lib/libropeattn.a lib/libropeattn.so lib/libropeattn.so.0 \
    include/ropeattn_hf.h lib/libropeattn_hf.a lib/libropeattn_hf.so lib/libropeattn_hf.so.0 \
    lib/pkgconfig/ropeattn.pc lib/pkgconfig/ropeattn-hf.pc lib/cmake/ropeattn/ropeattn-config.cmake \
    lib/cmake/ropeattn/ropeattn-config-version.cmake share/man/man1/ropeattn.1 \
    share/man/man1/ropeattn-attention.1; do
    if [ -e "$P/$f" ]; then pass; else fail "make install did not install $f"; fi
done
if readelf -d "$P/lib/libropeattn.so" | grep -q 'SONAME.*\[libropeattn\.so\.0\]'; then pass
else fail "libropeattn.so has no SONAME libropeattn.so.0"; fi
# The library needs BLAS, libm and threads only (cJSON is the checkpoint
# library's, which needs the library).
if readelf -d "$P/lib/libropeattn.so" | grep NEEDED | grep -q cjson; then
    fail "libropeattn.so needs libcjson"
else pass; fi
hf_dynamic=$(readelf -d "$P/lib/libropeattn_hf.so")
if grep -q 'SONAME.*\[libropeattn_hf\.so\.0\]' <<<"$hf_dynamic" &&
    grep NEEDED <<<"$hf_dynamic" | grep -q 'libropeattn\.so\.0' &&
    grep NEEDED <<<"$hf_dynamic" | grep -q cjson; then pass
else fail "libropeattn_hf.so: SONAME libropeattn_hf.so.0, needing libropeattn.so.0 and cJSON: $(grep -E 'NEEDED|SONAME' <<<"$hf_dynamic")"; fi

export PKG_CONFIG_PATH=$P/lib/pkgconfig
C=tests/install/consumer.c
# name, how it runs: built, it must print the library's version and exit 0;
# "shared" ones must need libropeattn.so.0, "static" ones no libropeattn.
check() {
    local name=$1 kind=$2 exe=$3 out needed
    out=$(LD_LIBRARY_PATH="$P/lib" "$exe" 2>&1)
    needed=$(readelf -d "$exe" | grep NEEDED)
    if [ "$out" != "ropeattn $("$P/bin/ropeattn" --version | cut -d' ' -f2)" ]; then
        fail "$name: printed '$out'"
    elif [ "$kind" = shared ] && ! grep -q 'libropeattn\.so\.0' <<<"$needed"; then
        fail "$name: does not need libropeattn.so.0"
    elif [ "$kind" = static ] && grep -q libropeattn <<<"$needed"; then
        fail "$name: needs the shared library"
    else pass; fi
}
cflags=$(pkg-config --cflags ropeattn)
libs=$(pkg-config --libs ropeattn)
static=$(pkg-config --static --libs ropeattn | sed 's/-lropeattn/-l:libropeattn.a/')
build() { # name, kind, compiler and flags...
    local name=$1 kind=$2
    shift 2
    if "$@" 2>"$TMP/err"; then check "$name" "$kind" "$TMP/$name"
    else fail "$name: $(head -c 400 "$TMP/err")"; fi
}
build pc_c_shared shared cc -std=c11 -Wall -Werror $cflags $C -o "$TMP/pc_c_shared" $libs -lm
build pc_c_static static cc -std=c11 -Wall -Werror $cflags $C -o "$TMP/pc_c_static" $static
build pc_cxx_shared shared c++ -std=c++17 -Wall -Werror -x c++ $cflags $C -x none \
    -o "$TMP/pc_cxx_shared" $libs
build pc_cxx_static static c++ -std=c++17 -Wall -Werror -x c++ $cflags $C -x none \
    -o "$TMP/pc_cxx_static" $static

# The checkpoint library: consumer_hf builds layer 1 of a checkpoint of
# tests/hf and runs it.
check_hf() {
    local name=$1 exe=$2 out
    out=$(LD_LIBRARY_PATH="$P/lib" "$exe" tests/hf/llama_default 2>&1)
    if [ "$out" = "llama: 4 tensors" ]; then pass; else fail "$name: printed '$out'"; fi
}
hf_cflags=$(pkg-config --cflags ropeattn-hf)
hf_static=$(pkg-config --static --libs ropeattn-hf | sed 's/-lropeattn\(_hf\)\?\b/-l:libropeattn\1.a/g')
if cc -std=c11 -Wall -Werror $hf_cflags tests/install/consumer_hf.c -o "$TMP/hf_c_shared" \
    $(pkg-config --libs ropeattn-hf) 2>"$TMP/err"; then check_hf pc_hf_c_shared "$TMP/hf_c_shared"
else fail "pc_hf_c_shared: $(head -c 400 "$TMP/err")"; fi
if c++ -std=c++17 -Wall -Werror -x c++ $hf_cflags tests/install/consumer_hf.c -x none \
    -o "$TMP/hf_cxx_static" $hf_static 2>"$TMP/err"; then
    check_hf pc_hf_cxx_static "$TMP/hf_cxx_static"
    if readelf -d "$TMP/hf_cxx_static" | grep NEEDED | grep -q libropeattn; then
        fail "pc_hf_cxx_static needs a shared ropeattn library"; else pass; fi
else fail "pc_hf_cxx_static: $(head -c 400 "$TMP/err")"; fi

# The MPI library, where mpicc is found (the Makefile builds it then):
# installed with its SONAME, needing libropeattn.so.0; consumer_mpi built
# through pkg-config, shared and static, runs (20 tokens over 3 ranks: rank 1
# holds chunks 1 and 4, of 4 and 3 tokens).
if command -v mpicc >/dev/null 2>&1; then
    mpi_dynamic=$(readelf -d "$P/lib/libropeattn_mpi.so" 2>&1)
    if [ -e "$P/include/ropeattn_mpi.h" ] && [ -e "$P/lib/libropeattn_mpi.a" ] &&
        [ -e "$P/lib/pkgconfig/ropeattn-mpi.pc" ] &&
        grep -q 'SONAME.*\[libropeattn_mpi\.so\.0\]' <<<"$mpi_dynamic" &&
        grep NEEDED <<<"$mpi_dynamic" | grep -q 'libropeattn\.so\.0'; then pass
    else fail "libropeattn_mpi: not installed with SONAME libropeattn_mpi.so.0 needing libropeattn.so.0"; fi
    mpi_static=$(pkg-config --static --libs ropeattn-mpi | sed 's/-lropeattn\(_mpi\)\?\b/-l:libropeattn\1.a/g')
    for kind in shared static; do
        mpi_libs=$(pkg-config --libs ropeattn-mpi)
        [ $kind = static ] && mpi_libs=$mpi_static
        if mpicc -std=c11 -Wall -Werror $(pkg-config --cflags ropeattn-mpi) tests/install/consumer_mpi.c \
            -o "$TMP/mpi_$kind" $mpi_libs 2>"$TMP/err" &&
            [ "$(LD_LIBRARY_PATH="$P/lib" "$TMP/mpi_$kind" 2>&1)" = "zigzag 4 4 14 3" ]; then pass
        else fail "consumer_mpi ($kind): $(head -c 400 "$TMP/err")"; fi
    done
fi

# The README's quickstart as C11 and as C++17, with gcc and with clang
# (when installed): it must build against the installed library and run.
n=0
for compiler in "cc -std=c11" "c++ -std=c++17 -x c++" "clang -std=c11" "clang++ -std=c++17 -x c++"; do
    command -v "${compiler%% *}" >/dev/null || continue
    n=$((n + 1))
    if $compiler -Wall -Wextra -Werror $cflags examples/quickstart.c -x none -o "$TMP/qs$n" $libs \
        2>"$TMP/err" && LD_LIBRARY_PATH="$P/lib" "$TMP/qs$n" >/dev/null 2>&1; then pass
    else fail "quickstart with $compiler: $(head -c 400 "$TMP/err")"; fi
done

if cmake -S tests/install -B "$TMP/cmake" -DCMAKE_PREFIX_PATH="$P" >"$TMP/log" 2>&1 &&
    cmake --build "$TMP/cmake" >>"$TMP/log" 2>&1; then
    for e in consumer_c_shared consumer_c_static consumer_cxx_shared consumer_cxx_static; do
        check "cmake $e" "${e##*_}" "$TMP/cmake/$e"
    done
    for e in consumer_hf_c_shared consumer_hf_cxx_static; do check_hf "cmake $e" "$TMP/cmake/$e"; done
    if command -v mpicc >/dev/null 2>&1; then
        for e in consumer_mpi_c_shared consumer_mpi_c_static; do
            if [ "$(LD_LIBRARY_PATH="$P/lib" "$TMP/cmake/$e" 2>&1)" = "zigzag 4 4 14 3" ]; then pass
            else fail "cmake $e: $(LD_LIBRARY_PATH="$P/lib" "$TMP/cmake/$e" 2>&1 | head -c 300)"; fi
        done
    fi
else fail "cmake find_package(ropeattn): $(tail -5 "$TMP/log")"; fi

# Staged with DESTDIR: the files land under it; no installed .pc or CMake
# file names a path (they find the prefix from their own place).
if make -s BUILD="$BUILD" PREFIX=/opt/ra DESTDIR="$TMP/stage" install >"$TMP/log" 2>&1 &&
    [ -e "$TMP/stage/opt/ra/lib/libropeattn.so.0" ]; then pass
else fail "make install DESTDIR=...: $(tail -3 "$TMP/log")"; fi
if grep -rl -e /opt/ra -e "$TMP" "$TMP/stage/opt/ra/lib/pkgconfig" "$TMP/stage/opt/ra/lib/cmake" >"$TMP/abs"; then
    fail "installed files name an absolute path: $(cat "$TMP/abs")"
else pass; fi
# Relocated: the staged tree moved to another directory still builds and
# runs programs through pkg-config and through find_package.
M=$TMP/moved/ra
mkdir -p "$TMP/moved" && mv "$TMP/stage/opt/ra" "$M"
if cc -std=c11 -Wall -Werror $(PKG_CONFIG_PATH=$M/lib/pkgconfig pkg-config --cflags ropeattn) $C \
    -o "$TMP/moved_pc" $(PKG_CONFIG_PATH=$M/lib/pkgconfig pkg-config --libs ropeattn) 2>"$TMP/err"; then
    P=$M check "moved prefix, pkg-config" shared "$TMP/moved_pc"
else fail "moved prefix, pkg-config: $(head -c 400 "$TMP/err")"; fi
if cmake -S tests/install -B "$TMP/cmake_moved" -DCMAKE_PREFIX_PATH="$M" >"$TMP/log" 2>&1 &&
    cmake --build "$TMP/cmake_moved" >>"$TMP/log" 2>&1; then
    for e in consumer_c_shared consumer_c_static; do
        P=$M check "moved prefix, cmake $e" "${e##*_}" "$TMP/cmake_moved/$e"
    done
    P=$M check_hf "moved prefix, cmake consumer_hf_c_shared" "$TMP/cmake_moved/consumer_hf_c_shared"
else fail "moved prefix, find_package(ropeattn): $(tail -5 "$TMP/log")"; fi

if make -s BUILD="$BUILD" PREFIX="$P" uninstall >"$TMP/log" 2>&1 &&
    [ -z "$(find "$P" -type f -o -type l)" ]; then pass
else fail "make uninstall left: $(find "$P" -type f -o -type l | head -5)"; fi
summary
