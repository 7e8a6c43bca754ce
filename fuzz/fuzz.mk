# fuzz.mk — libFuzzer targets (fuzz/fuzz_*.c), included by the Makefile.
#
#   make fuzz                       builds $(FUZZ_BUILD)/fuzz_* (default build/fuzz)
#   make fuzz-run FUZZ_SECONDS=60   runs each for that long on its seed corpus
#                                   (scripts/fuzz.sh; fails on any crash)
#
# Everything is built with AddressSanitizer and UndefinedBehaviorSanitizer,
# by clang with libFuzzer's coverage: the targets, the library and its SIMD
# kernels (src/cpu/kernels_*.c).  -ffp-contract=off keeps clang's float
# arithmetic that of GCC in C11 mode, as the kernels' bit-exact comparisons
# with the reference need; the kernels take the Makefile's KERNEL_FLAGS for
# clang instead (FMA within an expression, none in rope_impl.h).  Debian
# packages: clang, libclang-rt-14-dev (scripts/install-deps.sh).
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_COMMON   = -std=c11 -O1 -g -Wall -Wextra -Wshadow -Wstrict-prototypes \
                -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -Iinclude -Isrc $(BLAS_CFLAGS)
FUZZ_CFLAGS   = $(FUZZ_COMMON) -ffp-contract=off
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
# fuzz_cli also links the tools (tools/*.c but main.c; one process:
# tools/comm_single.c), built as the library is.
FUZZ_TOOL_OBJ := $(filter-out $(FUZZ_BUILD)/obj/tools/main.o,$(TOOL_SRC_ONE:%.c=$(FUZZ_BUILD)/obj/%.o))
FUZZ_TARGETS := $(patsubst fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard fuzz/fuzz_*.c))

fuzz: $(FUZZ_TARGETS)

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
