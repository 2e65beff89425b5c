# Developer shortcuts; scripts/dev.sh is the entry point that sets things up.
#   make sanitize   C++ tests under ASan+UBSan and under TSan (CI runs this)
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (default 300) each
.PHONY: demo test sanitize asan tsan fuzz

FUZZ_SECONDS ?= 300

fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

demo:
	scripts/dev.sh demo

test:
	scripts/dev.sh test

sanitize: asan tsan

asan:
	cmake -S . -B build/asan -G Ninja -DHDMLP_BUILD_TESTS=ON -DHDMLP_BUILD_PYTHON=OFF \
	  -DCMAKE_BUILD_TYPE=Debug -DHDMLP_SANITIZE=address,undefined >/dev/null
	cmake --build build/asan -j 2
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  ctest --test-dir build/asan --output-on-failure -j 2

tsan:
	cmake -S . -B build/tsan -G Ninja -DHDMLP_BUILD_TESTS=ON -DHDMLP_BUILD_PYTHON=OFF \
	  -DCMAKE_BUILD_TYPE=Debug -DHDMLP_SANITIZE=thread >/dev/null
	cmake --build build/tsan -j 2
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  ctest --test-dir build/tsan --output-on-failure -j 2
