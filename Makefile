# ropeattn — build with `make`; `make test` runs the suite; `make asan` runs it
# under AddressSanitizer + UndefinedBehaviorSanitizer; `make neon-test` runs
# the kernels built for aarch64 (NEON) under qemu-user.
# `make alloc-test`, `make tsan`, `make valgrind-cli`: allocation failures,
# threads under ThreadSanitizer, the CLI under valgrind memcheck (below).
# `make python`: the Python package's extension, in place (python/).
#
# `make install` (PREFIX, default /usr/local; DESTDIR for staging) installs
# the headers, the libraries (static and shared), the tool, its man page,
# ropeattn.pc, ropeattn-hf.pc (ropeattn-mpi.pc and libropeattn_mpi where MPI
# is found) and the CMake package (lib/cmake/ropeattn);
# `make uninstall` removes them.
#
# Outputs (under $(BUILD), default build/):
#   libropeattn.a                   the library, static (needs BLAS, libm, pthread)
#   libropeattn.so.$(VERSION)       shared (SONAME libropeattn.so.0; links .so.0, .so)
#   libropeattn_hf.a, .so.$(VERSION) Hugging Face checkpoints (include/ropeattn_hf.h:
#                                   src/hf: config.json and the model families,
#                                   and src/io's readers of safetensors, .npy and
#                                   JSON; needs libropeattn and cJSON); src/io's
#                                   writers serve the tool
#   libropeattn_mpi.a, .so.$(VERSION) context-parallel attention over MPI
#                                   (include/ropeattn_mpi.h: src/mpi; needs
#                                   libropeattn and MPI), built when $(MPICC)
#                                   is found (`make mpi` builds it alone)
#   mpi/test_mpi                    its test, run under mpirun by tests/test_mpi.sh
#   mpi/bench_mpi                   its bench: ring attention's compute and
#                                   exposed communication (docs/SCALING.md)
#   ropeattn                        the command-line tool
#   shared/ropeattn                 the same, on the public headers alone, linked
#                                   against the shared libraries (`make cli-shared`)
#   ropeattn-bench, ropeattn-demo,  the developer programs (bench/, dev/; not
#   ropeattn-train-demo             installed): the kernels timed, the demos
#   tests/test_*                    one program per test file
#   neon/test_neon                  tests/test_neon.c for aarch64 (static)

BUILD    ?= build
# The version is written once, in include/ropeattn.h (RA_VERSION_MAJOR, _MINOR, _PATCH).
VERSION  := $(subst $() ,.,$(foreach f,MAJOR MINOR PATCH,$(shell \
              sed -n 's/^\#define RA_VERSION_$(f) \([0-9][0-9]*\)$$/\1/p' include/ropeattn.h)))
MAJOR    := $(word 1,$(subst ., ,$(VERSION)))
MINOR    := $(word 2,$(subst ., ,$(VERSION)))
SOMAJOR  := $(MAJOR)
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR   ?= $(PREFIX)/share/man
CC       ?= cc
OPT      ?= -O3
SANITIZE ?=
CFLAGS   ?=
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

# No -ffast-math: the causal mask relies on -INFINITY and the tests on isnan.
# -ffp-contract=off (GCC's default in C11 mode; clang's is on): no FMA but
# in the kernels (below), as the bit-exact comparisons with the reference need.
# -Werror=incompatible-pointer-types (GCC 14's default): a call that passes
# the object where the context goes (the order before 0.3.0) does not build.
RA_CFLAGS = -std=c11 $(OPT) -g -Wall -Wextra -Wshadow -Wstrict-prototypes -ffp-contract=off \
            -Werror=incompatible-pointer-types \
            -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -fPIC \
            -Iinclude -Isrc $(BLAS_CFLAGS) $(SANITIZE) $(CFLAGS)
LIB_CFLAGS = $(RA_CFLAGS) -fvisibility=hidden -DRA_BUILDING_LIBRARY
LIB_LDLIBS = $(BLAS_LIBS) -lm -pthread
HF_CFLAGS  = $(LIB_CFLAGS) -DRA_BUILDING_HF_LIBRARY
LDLIBS   = $(BLAS_LIBS) -lcjson -lm -pthread

# The MPI library: only where an MPI compiler wrapper is installed (Debian:
# libopenmpi-dev), so that the rest builds without MPI.  mpicc compiles
# with $(CC) (OMPI_CC, MPICH_CC: the wrapper's compiler), so that CC=clang
# builds all of it with clang.
MPICC    ?= mpicc
MPI_CC    = OMPI_CC="$(CC)" MPICH_CC="$(CC)" $(MPICC)
HAVE_MPI := $(if $(shell command -v $(MPICC) 2>/dev/null),1)
MPI_SRC  := $(wildcard src/mpi/*.c)
MPI_OBJ  := $(MPI_SRC:%.c=$(BUILD)/obj/%.o)
MPI_CFLAGS = $(LIB_CFLAGS) -DRA_BUILDING_MPI_LIBRARY
MPI_ALL  := $(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn_mpi.so $(BUILD)/mpi/test_mpi \
            $(BUILD)/mpi/bench_mpi
INSTALL_MPI := $(if $(HAVE_MPI),$(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn_mpi.so)

CORE_SRC := $(wildcard src/*.c src/cpu/*.c)
HF_SRC   := $(wildcard src/io/*.c src/hf/*.c)
LIB_SRC  := $(CORE_SRC) $(HF_SRC)
# the CLI's comm.h: with MPI (tools/mpi, `mpirun -np P ropeattn attention`) or
# without (tools/comm_single.c; also the fuzz targets')
TOOL_SRC_ONE := $(wildcard tools/*.c)
TOOL_SRC := $(filter-out tools/comm_single.c,$(TOOL_SRC_ONE)) \
            $(if $(HAVE_MPI),$(wildcard tools/mpi/*.c),tools/comm_single.c)
# the developer programs (below; not installed)
DEV_PROGRAMS := $(BUILD)/ropeattn-bench $(BUILD)/ropeattn-demo $(BUILD)/ropeattn-train-demo
TEST_SRC := $(filter-out tests/test_neon.c tests/test_alloc_failure.c,$(wildcard tests/test_*.c))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
HF_OBJ   := $(HF_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

LIBS_HF  := $(BUILD)/libropeattn_hf.a $(BUILD)/libropeattn.a
HEADERS  := include/ropeattn.h include/ropeattn_hf.h include/ropeattn_io.h

all: $(BUILD)/libropeattn.a $(BUILD)/libropeattn.so $(BUILD)/libropeattn_hf.a \
     $(BUILD)/libropeattn_hf.so $(BUILD)/ropeattn $(DEV_PROGRAMS) $(BUILD)/shared/ropeattn \
     $(TESTS) $(EXAMPLES) $(if $(HAVE_MPI),$(MPI_ALL))

mpi: $(if $(HAVE_MPI),$(MPI_ALL),mpi-missing)
mpi-missing:
	@echo "make mpi: $(MPICC) is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)"; exit 1

# SIMD kernels: one template compiled per ISA, chosen at run time
# (src/cpu/dispatch.c), by GCC or clang; a * b + c contracts to FMA there
# and nowhere else.  GCC: -ffp-contract=fast.  clang: -ffp-contract=on (a
# * b + c within one expression, as the kernels write their FMAs), since
# clang's fast ignores the pragma with which rope_impl.h turns contraction
# off.  Their loops start on 64-byte lines: two builds that did the same
# work for a bf16 decode step (one condition written two ways) took
# 1.44-1.59 and 1.66-1.75 ms for it (bench, alternating); aligned, both
# 1.42-1.54.  $(call KERNEL_FLAGS,compiler,isa): those flags and the ISA's
# (on x86-64; the base file needs none elsewhere).
ISA_FLAGS_avx512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
ISA_FLAGS_avx512bf16 = $(ISA_FLAGS_avx512) -mavx512bf16 -mavx512vnni
ISA_FLAGS_amx    = $(ISA_FLAGS_avx512bf16) -mamx-tile -mamx-bf16
ISA_FLAGS_avx2   = -mavx2 -mfma -mf16c
ISA_FLAGS_base   =
KERNEL_FLAGS = $(if $(findstring clang,$(shell $(1) --version 2>/dev/null)),-ffp-contract=on,-ffp-contract=fast) \
               -falign-loops=64 $(if $(findstring x86_64,$(shell $(1) -dumpmachine)),$(ISA_FLAGS_$(2)))
$(BUILD)/obj/src/cpu/kernels_%.o: src/cpu/kernels_%.c include/ropeattn.h $(wildcard src/*.h src/cpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(call KERNEL_FLAGS,$(CC),$*) -c $< -o $@

$(BUILD)/obj/src/%.o: src/%.c include/ropeattn.h $(wildcard src/*.h src/cpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/io/%.o: src/io/%.c $(HEADERS) $(wildcard src/*.h src/io/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(HF_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/hf/%.o: src/hf/%.c $(HEADERS) $(wildcard src/io/*.h src/hf/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(HF_CFLAGS) -c $< -o $@

$(BUILD)/obj/src/mpi/%.o: src/mpi/%.c include/ropeattn.h include/ropeattn_mpi.h $(wildcard src/mpi/*.h)
	@mkdir -p $(dir $@)
	$(MPI_CC) $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/obj/tests/mpi/%.o: tests/mpi/%.c include/ropeattn.h include/ropeattn_mpi.h $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(MPI_CC) $(RA_CFLAGS) -c $< -o $@

$(BUILD)/obj/tools/mpi/%.o: tools/mpi/%.c $(HEADERS) include/ropeattn_mpi.h $(wildcard tools/*.h src/io/*.h src/hf/*.h)
	@mkdir -p $(dir $@)
	$(MPI_CC) $(RA_CFLAGS) -Itools -c $< -o $@

# the attention command's MPI launch (tools/attention_sharded.h)
$(BUILD)/obj/tools/cmd_attention.o: RA_CFLAGS += $(if $(HAVE_MPI),-DRA_CLI_MPI)

$(BUILD)/obj/bench/mpi/%.o: bench/mpi/%.c include/ropeattn.h include/ropeattn_mpi.h src/mpi/ring_stats.h
	@mkdir -p $(dir $@)
	$(MPI_CC) $(RA_CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c $(HEADERS) $(wildcard src/*.h src/io/*.h src/hf/*.h tools/*.h bench/*.h dev/*.h tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(RA_CFLAGS) -c $< -o $@

$(BUILD)/libropeattn.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libropeattn_hf.a: $(HF_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libropeattn.so.$(VERSION): $(CORE_OBJ)
	$(CC) -shared -Wl,-soname,libropeattn.so.$(SOMAJOR) -Wl,--as-needed $(SANITIZE) -o $@ $^ \
	  $(LIB_LDLIBS)

$(BUILD)/libropeattn.so: $(BUILD)/libropeattn.so.$(VERSION)
	ln -sf libropeattn.so.$(VERSION) $(BUILD)/libropeattn.so.$(SOMAJOR)
	ln -sf libropeattn.so.$(VERSION) $@

# The shared one carries its own copy of the allocators (src/memory.c),
# which libropeattn.so keeps hidden, and of the failure counter they ask
# (src/fault.c: empty but in the ASan build, -DRA_FAULT_INJECTION).
HF_SO_OBJ = $(HF_OBJ) $(BUILD)/obj/src/memory.o $(BUILD)/obj/src/fault.o
$(BUILD)/libropeattn_hf.so.$(VERSION): $(HF_SO_OBJ) $(BUILD)/libropeattn.so
	$(CC) -shared -Wl,-soname,libropeattn_hf.so.$(SOMAJOR) -Wl,--as-needed $(SANITIZE) -o $@ \
	  $(HF_SO_OBJ) -L$(BUILD) -lropeattn -lcjson -lm

$(BUILD)/libropeattn_hf.so: $(BUILD)/libropeattn_hf.so.$(VERSION)
	ln -sf libropeattn_hf.so.$(VERSION) $(BUILD)/libropeattn_hf.so.$(SOMAJOR)
	ln -sf libropeattn_hf.so.$(VERSION) $@

$(BUILD)/libropeattn_mpi.a: $(MPI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libropeattn_mpi.so.$(VERSION): $(MPI_OBJ) $(BUILD)/libropeattn.so
	$(MPI_CC) -shared -Wl,-soname,libropeattn_mpi.so.$(SOMAJOR) -Wl,--as-needed $(SANITIZE) -o $@ \
	  $(MPI_OBJ) -L$(BUILD) -lropeattn -lm

$(BUILD)/libropeattn_mpi.so: $(BUILD)/libropeattn_mpi.so.$(VERSION)
	ln -sf libropeattn_mpi.so.$(VERSION) $(BUILD)/libropeattn_mpi.so.$(SOMAJOR)
	ln -sf libropeattn_mpi.so.$(VERSION) $@

$(BUILD)/mpi/test_mpi: $(BUILD)/obj/tests/mpi/test_mpi.o $(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn.a
	@mkdir -p $(dir $@)
	$(MPI_CC) $(SANITIZE) -o $@ $< $(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn.a $(LIB_LDLIBS)

# against the static library: mpi_attention_timed is internal (hidden in the .so)
$(BUILD)/mpi/bench_mpi: $(BUILD)/obj/bench/mpi/bench_mpi.o $(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn.a
	@mkdir -p $(dir $@)
	$(MPI_CC) $(SANITIZE) -o $@ $< $(BUILD)/libropeattn_mpi.a $(BUILD)/libropeattn.a $(LIB_LDLIBS)

$(BUILD)/ropeattn: $(TOOL_OBJ) $(LIBS_HF) $(if $(HAVE_MPI),$(BUILD)/libropeattn_mpi.a)
	$(if $(HAVE_MPI),$(MPI_CC),$(CC)) $(SANITIZE) -o $@ $(TOOL_OBJ) \
	  $(if $(HAVE_MPI),$(BUILD)/libropeattn_mpi.a) $(LIBS_HF) $(LDLIBS)

# The developer programs (issue 42), apart from the user's ropeattn and not
# installed: ropeattn-bench (bench/), ropeattn-demo and ropeattn-train-demo
# (dev/), each with its main in dev/ and the tool's shared parts (cli.h's
# parser and main, outputs.h, progress.h), in one process (no MPI).
DEV_TOOL_OBJ := $(patsubst %,$(BUILD)/obj/tools/%.o,cli cli_main outputs progress)

$(BUILD)/ropeattn-bench: $(BUILD)/obj/dev/ropeattn_bench.o $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard bench/*.c))
$(BUILD)/ropeattn-demo: $(patsubst %,$(BUILD)/obj/dev/%.o,ropeattn_demo cmd_demo demo_checks)
$(BUILD)/ropeattn-train-demo: \
  $(patsubst %,$(BUILD)/obj/dev/%.o,ropeattn_train_demo cmd_train_demo adamw train_model)
$(DEV_PROGRAMS): $(DEV_TOOL_OBJ) $(LIBS_HF)
	$(CC) $(SANITIZE) -o $@ $(filter %.o,$^) $(LIBS_HF) $(LDLIBS)

# The CLI on the public API (issue 42): tools/ compiled with include/ and
# not src/ on the include path, into $(BUILD)/shared/, and linked against
# the shared libraries (-lropeattn_hf -lropeattn, -lropeattn_mpi where MPI
# is found), which it finds through its rpath ($ORIGIN/..: $(BUILD)).
# tests/test_cli_shared.sh runs it; tests/test_tools_public.sh keeps
# tools/ on the public headers.
SHARED_TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/shared/obj/%.o)
CLI_PUBLIC_CFLAGS = $(filter-out -Isrc,$(RA_CFLAGS))
SHARED_LIBS := $(BUILD)/libropeattn_hf.so $(BUILD)/libropeattn.so \
               $(if $(HAVE_MPI),$(BUILD)/libropeattn_mpi.so)
cli-shared: $(BUILD)/shared/ropeattn

$(BUILD)/shared/obj/tools/cmd_attention.o: RA_CFLAGS += $(if $(HAVE_MPI),-DRA_CLI_MPI)
$(BUILD)/shared/obj/tools/mpi/%.o: tools/mpi/%.c $(HEADERS) include/ropeattn_mpi.h $(wildcard tools/*.h)
	@mkdir -p $(dir $@)
	$(MPI_CC) $(CLI_PUBLIC_CFLAGS) -Itools -c $< -o $@

$(BUILD)/shared/obj/tools/%.o: tools/%.c $(HEADERS) $(wildcard tools/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CLI_PUBLIC_CFLAGS) -c $< -o $@

$(BUILD)/shared/ropeattn: $(SHARED_TOOL_OBJ) $(SHARED_LIBS)
	$(if $(HAVE_MPI),$(MPI_CC),$(CC)) $(SANITIZE) -o $@ $(SHARED_TOOL_OBJ) -L$(BUILD) \
	  $(if $(HAVE_MPI),-lropeattn_mpi) -lropeattn_hf -lropeattn -Wl,-rpath,'$$ORIGIN/..' \
	  $(BLAS_LIBS) -lm -pthread

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIBS_HF)
	@mkdir -p $(dir $@)
	$(CC) $(SANITIZE) -o $@ $< $(LIBS_HF) $(LDLIBS)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(BUILD)/libropeattn.a
	@mkdir -p $(dir $@)
	$(CC) $(SANITIZE) -o $@ $< $(BUILD)/libropeattn.a $(LIB_LDLIBS)

# NEON: the library's pure parts (all but the layer's files and gemm.c, which need CBLAS, and
# src/io, which needs cJSON) cross-compiled for aarch64 with Debian's
# gcc-aarch64-linux-gnu, the kernels with -ffp-contract=fast as above,
# linked static with tests/test_neon.c and run under qemu-aarch64
# (qemu-user).  `make test` builds it when the cross compiler is installed
# and tests/run.sh runs it; never under sanitizers (they do not link static).
NEON_CC     ?= aarch64-linux-gnu-gcc
NEON_CFLAGS  = -std=c11 $(OPT) -g -Wall -Wextra -Wshadow -Wstrict-prototypes \
               -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -Iinclude -Isrc
NEON_SRC    := $(filter-out src/layer%.c src/gemm.c,$(wildcard src/*.c)) $(wildcard src/cpu/*.c) tests/test_neon.c
NEON_OBJ    := $(NEON_SRC:%.c=$(BUILD)/neon/obj/%.o)
NEON_TEST   := $(if $(SANITIZE),,$(if $(shell command -v $(NEON_CC) 2>/dev/null),$(BUILD)/neon/test_neon))

$(BUILD)/neon/obj/src/cpu/kernels_%.o: src/cpu/kernels_%.c include/ropeattn.h $(wildcard src/*.h src/cpu/*.h)
	@mkdir -p $(dir $@)
	$(NEON_CC) $(NEON_CFLAGS) -ffp-contract=fast -c $< -o $@

$(BUILD)/neon/obj/%.o: %.c include/ropeattn.h $(wildcard src/*.h src/cpu/*.h tests/*.h)
	@mkdir -p $(dir $@)
	$(NEON_CC) $(NEON_CFLAGS) -c $< -o $@

$(BUILD)/neon/test_neon: $(NEON_OBJ)
	$(NEON_CC) -static -o $@ $^ -lm -pthread

neon-test: $(BUILD)/neon/test_neon
	qemu-aarch64 $<

# ---- install ------------------------------------------------------------
empty :=
space := $(empty) $(empty)
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
            -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
            -e 's|@MAJOR@|$(MAJOR)|g' -e 's|@MINOR@|$(MINOR)|g' -e 's|@SOMAJOR@|$(SOMAJOR)|g' \
            -e 's|@BLAS_LIBS@|$(strip $(BLAS_LIBS))|g' \
            -e 's|@BLAS_LIBS_CMAKE@|$(subst $(space),;,$(strip $(BLAS_LIBS)))|g' \
            -e 's|@MPI_PC@|$(MPI_PC)|g' \
            -e 's|@REL_LIBDIR@|$(REL_LIBDIR)|g' -e 's|@REL_INCLUDEDIR@|$(REL_INCLUDEDIR)|g' \
            -e 's|@CMAKE_TO_PREFIX@|$(call UP_FROM,$(REL_LIBDIR)/cmake/ropeattn)|g' \
            -e 's|@PC_PREFIX@|$(PC_PREFIX)|g' -e 's|@PC_LIBDIR@|$(PC_LIBDIR)|g' \
            -e 's|@PC_INCLUDEDIR@|$(PC_INCLUDEDIR)|g'
# Relocatable .pc and CMake files: LIBDIR and INCLUDEDIR relative to PREFIX
# (absolute, and the files too, where LIBDIR or INCLUDEDIR is outside it);
# UP_FROM,a/b/c is ../../.., the way from a/b/c back to PREFIX.
REL_LIBDIR = $(LIBDIR:$(PREFIX)/%=%)
REL_INCLUDEDIR = $(if $(filter /%,$(REL_LIBDIR)),$(INCLUDEDIR),$(INCLUDEDIR:$(PREFIX)/%=%))
UP_FROM = $(subst $() ,/,$(patsubst %,..,$(subst /, ,$(1))))
RELOCATABLE = $(if $(filter /%,$(REL_LIBDIR) $(REL_INCLUDEDIR)),,1)
PC_PREFIX = $(if $(RELOCATABLE),$${pcfiledir}/$(call UP_FROM,$(REL_LIBDIR)/pkgconfig),$(PREFIX))
PC_LIBDIR = $(if $(RELOCATABLE),$${prefix}/$(REL_LIBDIR),$(LIBDIR))
PC_INCLUDEDIR = $(if $(RELOCATABLE),$${prefix}/$(REL_INCLUDEDIR),$(INCLUDEDIR))
# the MPI's own pkg-config name, which ropeattn-mpi.pc requires
MPI_PC = $(shell pkg-config --exists ompi-c 2>/dev/null && echo ompi-c || \
                 (pkg-config --exists mpich 2>/dev/null && echo mpich))

# The man pages, ropeattn(1) and ropeattn-COMMAND(1), from the command pages
# docs/cli/*.md (tests/test_cli_docs.sh checks them against the tool's --help).
MAN_PAGES = $(patsubst docs/cli/%.md,$(BUILD)/man/%.1,$(wildcard docs/cli/*.md))
$(BUILD)/man/%.1: docs/cli/%.md scripts/manpage.sh include/ropeattn.h
	@mkdir -p $(@D)
	bash scripts/manpage.sh $< $(VERSION) > $@.tmp && mv $@.tmp $@

LIBNAMES = libropeattn libropeattn_hf $(if $(HAVE_MPI),libropeattn_mpi)

install: $(BUILD)/libropeattn.a $(BUILD)/libropeattn.so $(BUILD)/libropeattn_hf.a \
         $(BUILD)/libropeattn_hf.so $(BUILD)/ropeattn $(MAN_PAGES) $(INSTALL_MPI)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(LIBDIR)/cmake/ropeattn $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/ropeattn $(DESTDIR)$(BINDIR)/ropeattn
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(HEADERS) $(if $(HAVE_MPI),include/ropeattn_mpi.h) $(DESTDIR)$(INCLUDEDIR)/
	for lib in $(LIBNAMES); do \
	  install -m 644 $(BUILD)/$$lib.a $(DESTDIR)$(LIBDIR)/$$lib.a && \
	  install -m 755 $(BUILD)/$$lib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$lib.so.$(VERSION) && \
	  ln -sf $$lib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$lib.so.$(SOMAJOR) && \
	  ln -sf $$lib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$lib.so || exit 1; \
	done
	$(SUBST) pkgconfig/ropeattn.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn.pc
	$(SUBST) pkgconfig/ropeattn-hf.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn-hf.pc
	$(if $(HAVE_MPI),$(SUBST) pkgconfig/ropeattn-mpi.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn-mpi.pc)
	$(SUBST) cmake/ropeattn-config.cmake.in > $(DESTDIR)$(LIBDIR)/cmake/ropeattn/ropeattn-config.cmake
	$(SUBST) cmake/ropeattn-config-version.cmake.in \
	  > $(DESTDIR)$(LIBDIR)/cmake/ropeattn/ropeattn-config-version.cmake

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ropeattn $(MAN_PAGES:$(BUILD)/man/%=$(DESTDIR)$(MANDIR)/man1/%) \
	  $(HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%) $(DESTDIR)$(INCLUDEDIR)/ropeattn_mpi.h \
	  $(foreach lib,libropeattn libropeattn_hf libropeattn_mpi,$(DESTDIR)$(LIBDIR)/$(lib).a $(DESTDIR)$(LIBDIR)/$(lib).so \
	    $(DESTDIR)$(LIBDIR)/$(lib).so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/$(lib).so.$(VERSION)) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn.pc $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn-hf.pc \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/ropeattn-mpi.pc
	rm -rf $(DESTDIR)$(LIBDIR)/cmake/ropeattn

# `make test T="test_rope test_cli"`: those programs and suites alone, by name
# (tests/run.sh's RA_TEST; docs/TESTING.md: one case of a suite by name).
test: all $(NEON_TEST)
	BUILD=$(BUILD) RA_TEST="$(T)" bash tests/run.sh

# The ASan build carries -DRA_FAULT_INJECTION (src/fault.h: a counter that
# fails nothing until a test arms it), so that `make alloc-test
# ALLOC_BUILD=build-asan` (scripts/test.sh, with the same CC) reuses its
# objects and builds tests/test_alloc_failure.c alone.  -g1: line tables
# (inlined frames included), all that the sanitizers' reports print, at a
# third less compile time for the SIMD kernels than -g's (CFLAGS=-g after
# it gives the variables back).
ASAN_FLAGS = OPT=-O1 CFLAGS="-g1 $(CFLAGS) -DRA_FAULT_INJECTION" \
  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Its SIMD kernels are the fuzz targets' too (fuzz/fuzz.mk), so `make asan`
# and `make fuzz` build them first, under a lock: side by side
# (scripts/test.sh) the two never compile the same object at once, and
# whichever comes second finds them up to date (the same rule and flags).
ASAN_BUILD = build-asan
ASAN_KERNELS = $(patsubst %.c,$(ASAN_BUILD)/obj/%.o,$(wildcard src/cpu/kernels_*.c))
asan-kernels:
	@mkdir -p $(ASAN_BUILD)
	@flock $(ASAN_BUILD)/kernels.lock \
	  $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) $(ASAN_FLAGS) $(ASAN_KERNELS)
asan: asan-kernels
	@$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) $(ASAN_FLAGS) test

# Allocation failure: the library built with -DRA_FAULT_INJECTION (src/fault.h)
# under AddressSanitizer + LeakSanitizer, and tests/test_alloc_failure.c,
# which fails each allocation of every public path in turn.
ALLOC_BUILD = build-alloc
alloc-test:
	@$(MAKE) --no-print-directory BUILD=$(ALLOC_BUILD) $(ASAN_FLAGS) $(ALLOC_BUILD)/tests/test_alloc_failure
	OPENBLAS_NUM_THREADS=1 $(ALLOC_BUILD)/tests/test_alloc_failure

# ThreadSanitizer: tests/test_concurrency.c (application threads sharing
# objects) and the tests that run contexts of several threads, built into
# $(TSAN_BUILD).  OpenBLAS's threads synchronize in code TSan cannot see,
# so OpenBLAS runs on the calling thread (OPENBLAS_NUM_THREADS=1).  One SIMD
# path (RA_TEST_ONE_PATH, tests/harness.h): the threads and their tasks are
# the same on every path, and each path would add the whole run again.
TSAN_BUILD = build-tsan
TSAN_TESTS = test_concurrency test_attention test_attention_bf16 test_attention_bf16_backward \
             test_attention_backward test_kvcache test_kvcache8 \
             test_kvpool test_layer_paged test_rope test_mla test_layer_backward \
             test_weights16 test_attention_block
# The tests run side by side (make -j), each one's output printed whole (-O).
tsan:
	@$(MAKE) --no-print-directory BUILD=$(TSAN_BUILD) OPT=-O1 \
	  SANITIZE="-fsanitize=thread -fno-omit-frame-pointer" $(TSAN_TESTS:%=$(TSAN_BUILD)/tests/%)
	@$(MAKE) --no-print-directory -O $(TSAN_TESTS:%=tsan-run-%)
tsan-run-%:
	@OPENBLAS_NUM_THREADS=1 RA_TEST_ONE_PATH=1 TSAN_OPTIONS="halt_on_error=1" $(TSAN_BUILD)/tests/$*

# The CLI suites on real checkpoints and hostile files (test_hf.sh,
# test_cli_crash.sh, test_cli_files.sh; side by side, their output printed
# after) with ropeattn (the plain build) under valgrind memcheck (test_cli.sh's ~300 runs take it past ten minutes
# here; `make asan` runs every suite), each run logging to $(VALGRIND_LOGS)/PID.log; any
# error or leak (definite or possible) in any log fails (a failing command's
# exit code alone cannot tell: the tests expect 1..127 there).  Valgrind
# has no AVX-512, so the dispatch takes AVX2.  No suppressions are needed
# (OpenBLAS and libc run clean).
VALGRIND_LOGS = $(BUILD)/valgrind
VALGRIND = valgrind --leak-check=full --error-exitcode=99 \
           --log-file=$(abspath $(VALGRIND_LOGS))/%p.log
VALGRIND_SUITES = test_hf test_cli_crash test_cli_files
valgrind-cli: $(BUILD)/ropeattn
	@rm -rf $(VALGRIND_LOGS) $(VALGRIND_LOGS)-suites && mkdir -p $(VALGRIND_LOGS) $(VALGRIND_LOGS)-suites
	@for s in $(VALGRIND_SUITES); do \
	  (BUILD=$(BUILD) RA_CLI_WRAPPER="$(VALGRIND)" bash tests/$$s.sh \
	    > $(VALGRIND_LOGS)-suites/$$s.out 2>&1; echo $$? > $(VALGRIND_LOGS)-suites/$$s.rc) & \
	done; wait; status=0; \
	for s in $(VALGRIND_SUITES); do \
	  cat $(VALGRIND_LOGS)-suites/$$s.out; [ "$$(cat $(VALGRIND_LOGS)-suites/$$s.rc)" = 0 ] || status=1; \
	done; exit $$status
	@bad=$$(grep -L "ERROR SUMMARY: 0 errors" $(VALGRIND_LOGS)/*.log); \
	  if [ -n "$$bad" ]; then cat $$bad; echo "valgrind: errors in $$(echo $$bad | wc -w) runs"; exit 1; fi; \
	  echo "valgrind: $$(ls $(VALGRIND_LOGS) | wc -l) ropeattn runs, no errors and no leaks"

include fuzz/fuzz.mk

# The Python package's extension (python/src), built in place so that
# PYTHONPATH=python python3 -c 'import ropeattn' works; python/setup.py makes
# build/libropeattn_hf.a and build/libropeattn.a (the plain build, whatever
# BUILD is) and links them, with OpenBLAS and cJSON.
# `pip install --no-build-isolation ./python` installs the package.
PYTHON ?= /usr/bin/python3
python:
	cd python && $(PYTHON) setup.py -q build_ext --inplace

# tests/fixtures (Debian's python3), and tests/hf where .venv-hf exists
# (scripts/setup-hf-venv.sh: transformers and torch as tests/hf/requirements.txt
# pins them); `make hf-fixtures` remakes tests/hf and tests/hf_unpadded
# (ModernBERT's unpadded batches, tests/hf/unpadded_cases.py) alone, afresh.
HF_VENV ?= .venv-hf
HF_PYTHON = $(HF_VENV)/bin/python
fixtures:
	/usr/bin/python3 tests/fixtures/make_fixtures.py tests/fixtures
	@if [ -x $(HF_PYTHON) ]; then $(HF_PYTHON) tests/fixtures/make_rope2d_fixtures.py tests/fixtures/rope2d; fi
	@if [ -x $(HF_PYTHON) ]; then $(MAKE) --no-print-directory hf-fixtures; \
	  else echo "fixtures: no $(HF_PYTHON) (scripts/setup-hf-venv.sh): tests/hf left as it is"; fi

hf-fixtures:
	rm -rf $(BUILD)/hf-fixtures
	$(HF_PYTHON) tests/hf/make_hf_cases.py $(BUILD)/hf-fixtures
	find tests/hf -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
	cp -r $(BUILD)/hf-fixtures/. tests/hf/
	rm -rf $(BUILD)/hf-unpadded
	$(HF_PYTHON) tests/hf/unpadded_cases.py $(BUILD)/hf-unpadded
	rm -rf tests/hf_unpadded
	cp -r $(BUILD)/hf-unpadded tests/hf_unpadded

# The end-to-end suite inside transformers (tests/hf_e2e): tiny models of
# every family built by transformers, run with attn_implementation="ropeattn"
# against "eager" and "sdpa", and the CLI against their layers.  It runs under
# the venv of scripts/setup-hf-venv.sh (HF_VENV), with this checkout's package
# installed for it into $(HF_E2E_PY) (the venv itself is left as it is).
HF_E2E_PY = $(BUILD)/hf-e2e-python
hf-e2e: $(BUILD)/ropeattn
	@[ -x $(HF_VENV)/bin/python ] || { echo "hf-e2e: no venv at $(HF_VENV): make it with" \
	  "bash scripts/setup-hf-venv.sh (or name one: make hf-e2e HF_VENV=DIR)"; exit 1; }
	rm -rf $(HF_E2E_PY)
	$(HF_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
	  --target $(HF_E2E_PY) ./python
	PYTHONPATH=$(abspath $(HF_E2E_PY)) RA_CLI=$(abspath $(BUILD)/ropeattn) \
	  $(HF_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/hf_e2e

# The family sweep (tests/hf_sweep, issue 41): tests/hf_sweep/families.json
# (list_families.py: transformers' RoPE decoder families) and, for each, the
# CLI on a tiny checkpoint against transformers' layers (forward, cache and
# gradients: runs, refused or MISMATCH), each verdict against
# tests/hf_sweep/expected.tsv (HF_SWEEP_FLAGS=--update rewrites it); the
# checkpoints are kept in $(BUILD)/hf-sweep between runs.
hf-sweep: $(BUILD)/ropeattn
	$(HF_PYTHON) tests/hf_sweep/sweep.py tests/hf_sweep/families.json $(BUILD)/hf-sweep \
	  $(BUILD)/ropeattn $(HF_SWEEP_FLAGS)

hf-families:
	$(HF_PYTHON) tests/hf_sweep/list_families.py tests/hf_sweep/families.json

# docs/FAMILIES.md's family table and the README's lines on the families,
# from the library's table (ropeattn families), tests/hf_sweep/families.json
# and the sweep's expected verdicts (tests/hf_sweep/expected.tsv: `make
# hf-sweep HF_SWEEP_FLAGS=--update` rewrites it); make test checks them
# (tests/test_family_table.sh).
families-doc: $(BUILD)/ropeattn
	$(PYTHON) tests/hf_sweep/family_table.py $(BUILD)/ropeattn --write

# The PyTorch 2 comparison (issue 40, docs/perf/2026-12-06-torch2.md): the
# bench's vs torch2 column and a model end to end, where .venv-hf exists
# (scripts/setup-hf-venv.sh); not part of `make test`.  About 4 minutes.
bench-torch2: $(BUILD)/ropeattn-bench
	BUILD=$(abspath $(BUILD)) bash bench/torch2_table.sh

clean:
	rm -rf build $(ASAN_BUILD) $(ALLOC_BUILD) $(TSAN_BUILD) python/build python/ropeattn.egg-info \
	  python/ropeattn/_ropeattn*.so

.PHONY: all cli-shared mpi mpi-missing test asan asan-kernels neon-test python fixtures hf-fixtures hf-e2e hf-sweep hf-families families-doc bench-torch2 clean alloc-test tsan valgrind-cli install uninstall
.SECONDARY:
