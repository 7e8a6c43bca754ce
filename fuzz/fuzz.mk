# fuzz.mk — libFuzzer targets (fuzz/fuzz_*.c), included by the Makefile.
#
#   make fuzz                       builds $(FUZZ_BUILD)/fuzz_* (default build/fuzz)
#   make fuzz-run FUZZ_SECONDS=60   runs each for that long on its seed corpus
#                                   (scripts/fuzz.sh; fails on any crash)
#
# Everything is built with AddressSanitizer and UndefinedBehaviorSanitizer,
# by clang with libFuzzer's coverage: the targets, the library and its SIMD
# kernels (src/cpu/kernels_*.c), whose branches (tails, masks) are about
# half the edges of the attention, kvcache and layer targets.
# FUZZ_KERNELS=asan links the ASan build's kernel objects instead
# ($(ASAN_BUILD)/obj/src/cpu, `make asan-kernels CC=clang`: the same
# sanitizers, -O1 and KERNEL_FLAGS, plus the allocation-failure counter,
# which fails nothing unless a test arms it and no fuzz target does), built
# first if they are not up to date: no coverage inside the kernels, but
# ~280 CPU s less to build (docs/TESTING.md).  scripts/test.sh's short run
# takes it, on the corpora a run with the kernels' coverage grew; long runs
# keep the default.  -ffp-contract=off keeps clang's float arithmetic that
# of GCC in C11 mode, as the kernels' bit-exact comparisons with the
# reference need; the kernels take the Makefile's KERNEL_FLAGS for clang
# instead (FMA within an expression, none in rope_impl.h).  Debian packages:
# clang, libclang-rt-14-dev (scripts/install-deps.sh).
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_COMMON   = -std=c11 -O1 -g -Wall -Wextra -Wshadow -Wstrict-prototypes \
                -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -Iinclude -Isrc $(BLAS_CFLAGS)
FUZZ_CFLAGS   = $(FUZZ_COMMON) -ffp-contract=off
FUZZ_KERNELS ?= coverage
FUZZ_KERNEL_SRC := $(wildcard src/cpu/kernels_*.c)
ifeq ($(FUZZ_KERNELS),asan)
FUZZ_KERNEL_OBJ := $(FUZZ_KERNEL_SRC:%.c=$(ASAN_BUILD)/obj/%.o)
else ifeq ($(FUZZ_KERNELS),coverage)
FUZZ_KERNEL_OBJ := $(FUZZ_KERNEL_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
else
$(error FUZZ_KERNELS=$(FUZZ_KERNELS): coverage or asan)
endif
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(filter-out $(FUZZ_KERNEL_SRC),$(LIB_SRC))) \
                $(FUZZ_KERNEL_OBJ)
# fuzz_cli also links the tools (tools/*.c but main.c; one process:
# tools/comm_single.c), built as the library is.
FUZZ_TOOL_OBJ := $(filter-out $(FUZZ_BUILD)/obj/tools/main.o,$(TOOL_SRC_ONE:%.c=$(FUZZ_BUILD)/obj/%.o))
FUZZ_TARGETS := $(patsubst fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard fuzz/fuzz_*.c))

# FUZZ_KERNELS=asan: the kernels first (their build's own rule, under its
# lock), then the targets; a kernel object some other compiler built (`make
# asan` with GCC) is refused rather than linked with clang's runtime.
fuzz:
ifeq ($(FUZZ_KERNELS),asan)
	@$(MAKE) --no-print-directory asan-kernels CC=$(FUZZ_CC)
	@for o in $(ASAN_KERNELS); do readelf -p .comment $$o | grep -q clang || \
	  { echo "fuzz: $$o was not built by clang (rm -rf $(ASAN_BUILD), or make asan-kernels CC=clang)"; exit 1; }; done
endif
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS)

fuzz-run:
	FUZZ_BUILD=$(FUZZ_BUILD) bash scripts/fuzz.sh $(FUZZ_SECONDS)

$(FUZZ_BUILD)/obj/src/cpu/kernels_%.o: src/cpu/kernels_%.c include/ropeattn.h $(wildcard src/*.h src/cpu/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_COMMON) -fvisibility=hidden -DRA_BUILDING_LIBRARY \
	  $(call KERNEL_FLAGS,$(FUZZ_CC),$*) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c $< -o $@

$(FUZZ_BUILD)/obj/src/%.o: src/%.c $(HEADERS) $(wildcard src/*.h src/io/*.h src/hf/*.h src/cpu/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fvisibility=hidden -DRA_BUILDING_LIBRARY \
	  -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c $< -o $@

$(FUZZ_BUILD)/obj/%.o: %.c $(HEADERS) $(wildcard src/io/*.h src/hf/*.h tools/*.h bench/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c $< -o $@

$(FUZZ_BUILD)/libropeattn.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(wildcard fuzz/*.h) $(FUZZ_BUILD)/libropeattn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< $(FUZZ_BUILD)/libropeattn.a \
	  $(LDLIBS)

$(FUZZ_BUILD)/fuzz_cli: fuzz/fuzz_cli.c $(FUZZ_TOOL_OBJ) $(FUZZ_BUILD)/libropeattn.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< $(FUZZ_TOOL_OBJ) \
	  $(FUZZ_BUILD)/libropeattn.a $(LDLIBS)

.PHONY: fuzz fuzz-run
