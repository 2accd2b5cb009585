# agentz - one non-recursive GNU Makefile.
#
#   make            build/agentz and build/agentz-worker
#   make check      unit + integration tests, then the same with ASan+UBSan
#   make demo       a real agent run against the bundled test model server
#   make report-demo  the demo's journal as an HTML report, and a headless
#                   chromium screenshot of it (docs/report-demo.png)
#   make bench      benchmarks (print figures; never part of check)
#   make fuzz       libFuzzer on the frame decoder, the JSON scanner and
#                   the SSE parser, bounded time
#   make lint       clang-tidy, cppcheck, header self-containment
#   make image      an OCI image archive, build/agentz-image.tar (root)
#   make check-container  that image under Podman (root; not in check)
#   make install    binaries, unit, man page, completion, docs (PREFIX,
#                   DESTDIR); make uninstall removes them
#
# Variants never mix: O=build (default), SAN=1 -> build-san, CC=clang ->
# build-clang (build-san-clang with SAN=1).
# Warnings are errors (WERROR=0 turns that off for packagers).

O       ?= build
SAN     ?= 0
WERROR  ?= 1
CC      ?= cc
PY      := /usr/bin/python3
FUZZ_SECONDS ?= 60

ifeq ($(SAN),1)
O        := build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	    -fno-omit-frame-pointer
endif
ifneq ($(findstring clang,$(notdir $(firstword $(CC)))),)
O        := $(O)-clang
else ifeq ($(SAN),1)
# GCC's UBSan runtime linked in, only the parts used: the shared
# libubsan.so carries 6 MB of zeroed globals (a stack depot of its own)
# that LeakSanitizer scans at every exit, ~20 ms of CPU per process, in
# thousands of processes per pass. Its reports are the same.
SANLINK  := -static-libubsan
endif

WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wold-style-definition -Wpointer-arith \
	-Wwrite-strings -Wformat=2 -Wvla -Wcast-qual -Wswitch-enum -Wundef \
	-Wimplicit-fallthrough -fno-common
ifeq ($(WERROR),1)
WARN += -Werror
endif

# Dependencies come from Debian packages: the deps target installs the
# missing ones (scripts/install-deps: one quiet dpkg-query when nothing is
# missing). Everything that compiles, links or runs a tool waits for it
# (order-only, so it never forces a rebuild); nothing asks while the
# Makefile is parsed, so make clean never calls apt-get.
# The supervisor links jansson and msgpack; libcurl only by its header:
# the model client loads it at its first use (supervisor/model/http_lib.c),
# so `agentz exec` and the rest never map it and its forty libraries
# (15 ms of every start). sd_notify's protocol is spoken in
# supervisor/ui/notify.c, without libsystemd.
PKGS_SUP := jansson msgpack
PKGS_SUP_HDR := libcurl
PKGS_WRK := python3-embed msgpack libseccomp

# Third-party headers as -isystem so their warnings are not ours. Lazy
# (expanded in recipes, after deps): pkg-config may not be installed yet.
pc_cflags = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags $(1)))
pc_libs   = $(shell pkg-config --libs $(1))

CFLAGS   ?= -O2 -g
CPPFLAGS += -I. -D_GNU_SOURCE
ALL_CFLAGS  = -std=c11 $(CPPFLAGS) $(WARN) $(CFLAGS) $(SANFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS) $(SANLINK)

COMMON_SRC  := $(wildcard common/*.c)
PROTO_SRC   := $(wildcard proto/*.c)
SBX_W_SRC   := $(wildcard sandbox/seccomp*.c)
SBX_S_SRC   := $(filter-out $(SBX_W_SRC),$(wildcard sandbox/*.c))
SUP_SRC     := $(filter-out supervisor/front/main.c,$(wildcard supervisor/*/*.c))
WRK_SRC     := $(wildcard worker/*.c)
UNIT_SRC    := $(wildcard tests/unit/test_*.c tests/unit/*/test_*.c)
# The worker's Python runtime, embedded at build time.
WRK_PY      := $(sort $(wildcard worker/*.py))
ENGINE_SRC  := $(sort $(wildcard supervisor/*/*.[ch] worker/*.[ch] worker/*.py \
		proto/*.[ch] sandbox/*.[ch] common/*.[ch]))

obj = $(patsubst %.c,$(O)/%.o,$(1))

COMMON_OBJ := $(call obj,$(COMMON_SRC))
PROTO_OBJ  := $(call obj,$(PROTO_SRC))
SUP_OBJ    := $(call obj,$(SUP_SRC) $(SBX_S_SRC))
WRK_OBJ    := $(call obj,$(WRK_SRC) $(SBX_W_SRC)) $(O)/gen/embedded.o
# tests/unit/<folder>/test_x.c -> $(O)/tests/test_x (names are unique).
UNIT_BIN   := $(addprefix $(O)/tests/,$(basename $(notdir $(UNIT_SRC))))

SUP_LIBS = $(call pc_libs,$(PKGS_SUP)) -lm
WRK_LIBS = $(call pc_libs,$(PKGS_WRK)) -lpthread

$(O)/supervisor/%.o $(O)/sandbox/%.o $(O)/tests/unit/%.o: \
	ALL_CFLAGS += $(call pc_cflags,$(PKGS_SUP_HDR) jansson)
$(O)/worker/%.o $(O)/sandbox/seccomp%.o: \
	ALL_CFLAGS += $(call pc_cflags,python3-embed libseccomp)
$(O)/proto/%.o: ALL_CFLAGS += $(call pc_cflags,msgpack)
$(O)/tests/unit/%.o: ALL_CFLAGS += $(call pc_cflags,cmocka)

.PHONY: all deps check check-systemd check-container image fixtures unit unit-bin check-unit integ integ-ready demo bench fuzz lint \
	check-headers clean verify-units install uninstall report-demo
all: $(O)/agentz $(O)/agentz-worker

# DEPS=demo: only what make demo needs (make demo sets it); a clang
# build also needs clang (the fuzz set).
ifneq ($(findstring clang,$(notdir $(firstword $(CC)))),)
DEPS ?= fuzz
endif
DEPS ?= build
deps:
	@scripts/install-deps --check $(DEPS) || { echo "agentz: installing" \
	    "missing $(DEPS) dependencies (apt-get)" >&2; \
	    scripts/install-deps $(DEPS); }

$(O)/%.o: %.c | deps
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(O)/libagentz.a: $(COMMON_OBJ) $(PROTO_OBJ) $(SUP_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(O)/agentz: $(O)/supervisor/front/main.o $(O)/libagentz.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SUP_LIBS)

$(O)/gen/embedded.c: scripts/embed.py $(ENGINE_SRC) | deps
	@mkdir -p $(@D)
	$(PY) scripts/embed.py $@ $(WRK_PY) -- $(ENGINE_SRC)

$(O)/gen/embedded.o: $(O)/gen/embedded.c
	$(CC) -std=c11 $(CFLAGS) $(SANFLAGS) -c -o $@ $<

$(O)/agentz-worker: $(WRK_OBJ) $(COMMON_OBJ) $(PROTO_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(WRK_LIBS)

define unit_rule
$(O)/tests/$(basename $(notdir $(1))): $(call obj,$(1)) $(O)/libagentz.a
	$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ $$(SUP_LIBS) $$(call pc_libs,cmocka)
endef
$(foreach s,$(UNIT_SRC),$(eval $(call unit_rule,$(s))))

# the jail's tests share a fixture
$(O)/tests/test_jail_kill $(O)/tests/test_jail_exit: \
	$(O)/tests/unit/sandbox/jailfix.o

# try_syscall probes the seccomp policy from outside; never sanitized.
$(O)/tests/try_syscall: $(wildcard tests/sandbox/*.c) $(SBX_W_SRC) \
		tests/sandbox/try_syscall.h | deps
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -I. -O1 $(WARN) \
	    $(call pc_cflags,libseccomp) -o $@ $(filter %.c,$^) \
	    $(call pc_libs,libseccomp)

ifeq ($(SAN),1)
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=0:exitcode=86:allocator_may_return_null=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1:exitcode=86
export LSAN_OPTIONS := suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0
endif

# The recorded Responses API streams: the sibling shared/ folder.
FIXTURES := $(abspath $(CURDIR)/../shared/fixtures/responses)

fixtures:
	@test -d $(FIXTURES) || { echo "agentz: the tests need the sibling" \
	    "../shared folder (missing: $(FIXTURES))" >&2; exit 1; }

# One target per test binary: make -j runs them side by side.
UNIT_RUN := $(addsuffix .run,$(UNIT_BIN))
.PHONY: $(UNIT_RUN)
unit: $(UNIT_RUN)
$(UNIT_RUN): %.run: % | fixtures
	@AGENTZ_FIXTURES=$(FIXTURES) $<
unit-bin: $(UNIT_BIN)

# make check's unit tests: both passes side by side (built already), each
# with a job per core (they wait on their servers and children more than
# they compute: 12 + 22 s one pass after the other, 20 s together),
# each pass's output shown whole once both are done.
check-unit:
	@$(MAKE) --no-print-directory -j$(NPROC) -Otarget unit \
	    >$(O)/unit.log 2>&1 & rel=$$!; \
	$(MAKE) --no-print-directory SAN=1 -j$(NPROC) -Otarget unit \
	    >$(O_SAN)/unit.log 2>&1 & san=$$!; \
	rc=0; wait $$rel || rc=1; wait $$san || rc=1; \
	echo "== release: unit"; cat $(O)/unit.log; \
	echo "== ASan+UBSan: unit"; cat $(O_SAN)/unit.log; \
	exit $$rc

# Three pytest runs (tests/integ/conftest.py): every test marked neither
# serial nor alone in parallel (pytest-xdist; they mostly wait on
# processes, hence more workers than cores; INTEG_JOBS=0 runs them in one
# process), then the serial ones one per core (they measure the wall
# clock: each gets a core), then the alone ones one at a time (they flood
# the machine). All three run even if one fails.
NPROC := $(shell nproc 2>/dev/null || echo 1)
INTEG_JOBS ?= $(shell echo $$(( $(NPROC) * 2 )))
INTEG_RUN = AGENTZ_BUILD=$(CURDIR)/$(O) AGENTZ_SAN=$(SAN) \
	    AGENTZ_FIXTURES=$(FIXTURES) $(PY) -m pytest -q -p no:cacheprovider
INTEG_PARTS := integ-parallel integ-serial integ-alone
.PHONY: $(INTEG_PARTS) check-integ
integ: integ-ready
	rc=0; for part in $(INTEG_PARTS); do \
	    $(MAKE) --no-print-directory $$part || rc=1; done; exit $$rc
integ-ready: all $(O)/tests/try_syscall fixtures
	@$(PY) -c 'import xdist' 2>/dev/null || { echo "agentz: make integ" \
	    "needs pytest-xdist (scripts/install-deps check)" >&2; exit 1; }
integ-parallel: integ-ready
	$(INTEG_RUN) -n $(INTEG_JOBS) --dist loadgroup \
	    -m 'not serial and not alone' tests/integ
integ-serial: integ-ready
	$(INTEG_RUN) -n $(NPROC) -m serial tests/integ
integ-alone: integ-ready
	$(INTEG_RUN) -m alone tests/integ

# make check's integration tests, both passes: their parallel parts side
# by side (one pass's long tests fill the cores the other's leave idle),
# then their serial parts side by side (two of each at a time: they wait
# on deadlines more than they compute), each pass's output shown whole
# once both are done (in $(O)/integ-PART.log and $(O_SAN)/integ-PART.log),
# then each pass's alone part by itself. Every part runs even if one
# fails.
O_SAN = $(subst build,build-san,$(O))
# Side by side, the ASan pass gets more of the parallel part's workers:
# its processes cost about three times the CPU, and its part was the
# long pole (276 s release, 399 s ASan with as many workers each, the
# last 123 s alone on cores it left a third idle).
CHECK_JOBS_REL ?= $(shell echo $$(( ($(NPROC) * 3 + 1) / 2 )))
CHECK_JOBS_SAN ?= $(shell echo $$(( ($(NPROC) * 5 + 1) / 2 )))
check-integ:
	@$(MAKE) --no-print-directory integ-ready && \
	    $(MAKE) --no-print-directory SAN=1 integ-ready
	@rc=0; \
	for part in integ-parallel integ-serial; do \
	    echo "== $$part of both passes, side by side"; \
	    $(MAKE) --no-print-directory INTEG_JOBS=$(CHECK_JOBS_REL) \
		$$part >$(O)/$$part.log 2>&1 & rel=$$!; \
	    $(MAKE) --no-print-directory INTEG_JOBS=$(CHECK_JOBS_SAN) \
		SAN=1 $$part >$(O_SAN)/$$part.log 2>&1 & san=$$!; \
	    wait $$rel || rc=1; wait $$san || rc=1; \
	    echo "== release: $$part"; cat $(O)/$$part.log; \
	    echo "== ASan+UBSan: $$part"; cat $(O_SAN)/$$part.log; \
	done; \
	echo "== release: integ-alone"; \
	$(MAKE) --no-print-directory integ-alone || rc=1; \
	echo "== ASan+UBSan: integ-alone"; \
	$(MAKE) --no-print-directory SAN=1 integ-alone || rc=1; \
	exit $$rc

# Both builds of the binaries with -j (one job per core) while the test
# set is installed in the background ($(O)/check-deps.log: first what
# the unit tests and the booted-systemd test's tools need, scripts/
# install-deps check-build, then the rest: chromium, pytest-xdist, ...),
# so apt's downloads and dpkg overlap the compilers; the binaries need
# only make demo's set (installed first if missing). Then the unit tests'
# binaries once check-build is in (a FIFO says so), both unit passes
# side by side (check-unit), and the integration tests of both passes
# (check-integ) once the whole set is in. As root, the booted-systemd
# test's Debian root (a debootstrap the first time) is prepared in the
# background too; that test waits for it ($(O)/systemd-root.log). Each
# phase's line says when it began, in seconds since make check did.
check: fixtures
	@scripts/install-deps --check demo || scripts/install-deps demo
	@mkdir -p $(O); log=$(O)/check-deps.log; fifo=$(O)/check-build.rc; \
	t0=$$(date +%s); at() { echo "== $$1 (at $$(( $$(date +%s) - t0 )) s)"; }; \
	rm -f $$fifo && mkfifo $$fifo || exit 1; \
	echo "agentz: installing the test set in the background while" \
	    "compiling ($$log)"; \
	{ scripts/install-deps check-build; r=$$?; echo $$r >$$fifo & \
	  [ $$r = 0 ] || exit $$r; \
	  if [ "$$(id -u)" = 0 ]; then scripts/systemd-root --prepare \
	      >$(O)/systemd-root.log 2>&1 & fi; \
	  scripts/install-deps check; } >$$log 2>&1 & deps=$$!; \
	rc=0; at "build"; \
	$(MAKE) DEPS=demo -j$(NPROC) -Otarget all && \
	    $(MAKE) DEPS=demo SAN=1 -j$(NPROC) -Otarget all || rc=1; \
	read built <$$fifo; rm -f $$fifo; \
	[ "$$built" = 0 ] || { cat $$log; echo "agentz: scripts/install-deps" \
	    "check-build failed (its output above)" >&2; exit 1; }; \
	[ $$rc = 0 ] && at "unit tests' binaries" && \
	    $(MAKE) -j$(NPROC) -Otarget unit-bin && \
	    $(MAKE) SAN=1 -j$(NPROC) -Otarget unit-bin && at "unit tests" && \
	    $(MAKE) --no-print-directory check-unit || rc=1; \
	wait $$deps || { cat $$log; echo "agentz: scripts/install-deps" \
	    "check failed (its output above)" >&2; exit 1; }; \
	[ $$rc = 0 ] && at "integration tests" && \
	    $(MAKE) --no-print-directory check-integ || rc=1; \
	at "done"; exit $$rc

# A booted systemd (systemd-nspawn -b) running the shipped unit through
# its life: READY/STATUS, the watchdog, Restart=, budget stops, stop.
# Minutes, not part of check.
check-systemd: all
	AGENTZ_BUILD=$(CURDIR)/$(O) $(PY) -m pytest -q -p no:cacheprovider \
	    tests/systemd

# An OCI image archive of the two binaries and the Python they need, built
# offline from a debootstrapped Debian 12 (root): docs/deploying.md.
image: all
	scripts/make-image $(O) $(O)/agentz-image.tar

# The image under rootful Podman (not in make check: root, Podman, the
# image): what holds under the runtime's defaults, and the attack subset
# with /proc unmasked (tests/container).
check-container: image
	scripts/install-deps container
	AGENTZ_BUILD=$(CURDIR)/$(O) $(PY) -m pytest -q -p no:cacheprovider \
	    tests/container

# Only the demo's packages (a C compiler, the -dev libraries, python3):
# never clang, the test tools or chromium.
demo:
	$(MAKE) DEPS=demo all
	$(PY) scripts/demo.py $(O)

# The demo run with a journal, its report, and a screenshot of the report
# in headless chromium (installed here, never by make demo) for README.
REPORT_DEMO := $(O)/report-demo
report-demo: all
	scripts/install-deps check
	rm -rf $(REPORT_DEMO) && mkdir -p $(REPORT_DEMO) docs
	AGENTZ_JOURNAL=$(CURDIR)/$(REPORT_DEMO)/journal.jsonl \
	    $(PY) scripts/demo.py $(O) >$(REPORT_DEMO)/demo.log 2>&1 || \
	    { cat $(REPORT_DEMO)/demo.log; exit 1; }
	$(O)/agentz report $(REPORT_DEMO)/journal.jsonl -o $(REPORT_DEMO)/run.html
	chromium --headless --no-sandbox --hide-scrollbars \
	    --user-data-dir=$(CURDIR)/$(REPORT_DEMO)/chromium \
	    --window-size=1100,1700 --screenshot=$(CURDIR)/docs/report-demo.png \
	    file://$(CURDIR)/$(REPORT_DEMO)/run.html 2>$(REPORT_DEMO)/chromium.log
	@echo "report-demo: $(REPORT_DEMO)/run.html, docs/report-demo.png"

bench: all
	scripts/install-deps bench
	$(PY) bench/run.py $(O)
	$(PY) bench/startup.py $(O)
	$(PY) bench/model_overhead.py $(O)
	$(PY) bench/isolation.py $(O)
	$(PY) bench/egress.py $(O)
	$(PY) bench/crash_soak.py $(O)
	$(PY) bench/death_soak.py $(O)
	$(PY) bench/soak.py $(O)

# clang and its libFuzzer runtime: scripts/install-deps fuzz, before any
# fuzz target compiles (order-only).
.PHONY: fuzz-deps
fuzz-deps:
	@scripts/install-deps --check fuzz || scripts/install-deps fuzz

FUZZ_CC    = clang -std=c11 -D_GNU_SOURCE -I. -g -O1 $(WARN) \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_BIN := build-fuzz/fuzz_proto
FUZZ_BINS := $(FUZZ_BIN) build-fuzz/fuzz_jspan build-fuzz/fuzz_sse \
	build-fuzz/fuzz_egress
$(FUZZ_BINS): | fuzz-deps
FUZZ_JSON_SRC := supervisor/model/jspan.c supervisor/model/delta.c \
	supervisor/model/response.c supervisor/model/response_item.c \
	supervisor/model/response_msg.c supervisor/model/response_share.c \
	common/buf.c
$(FUZZ_BIN): tests/fuzz/fuzz_proto.c $(PROTO_SRC) common/buf.c proto/proto.h \
	common/buf.h common/fdio.c common/fdio.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(call pc_cflags,msgpack) \
	    -o $@ tests/fuzz/fuzz_proto.c $(PROTO_SRC) common/buf.c \
	    common/fdio.c $(call pc_libs,msgpack)

# The one JSON scanner (jspan.c, delta.c) against jansson.
build-fuzz/fuzz_jspan: tests/fuzz/fuzz_jspan.c $(FUZZ_JSON_SRC) \
	    supervisor/model/jspan.h supervisor/model/delta.h \
	    supervisor/model/response.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(call pc_cflags,jansson) -DSHARE_MIN=8 \
	    -o $@ tests/fuzz/fuzz_jspan.c \
	    $(FUZZ_JSON_SRC) $(call pc_libs,jansson) -lm

build-fuzz/fuzz_sse: tests/fuzz/fuzz_sse.c supervisor/model/sse.c \
	    supervisor/model/sse.h \
	    common/buf.c
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ tests/fuzz/fuzz_sse.c supervisor/model/sse.c common/buf.c

# What a cell sends the egress proxy: heads, ClientHellos, entries.
build-fuzz/fuzz_egress: tests/fuzz/fuzz_egress.c supervisor/egress/head.c \
	    supervisor/egress/head.h supervisor/egress/policy.c \
	    supervisor/egress/policy.h
	@mkdir -p $(@D)
	$(FUZZ_CC) -o $@ tests/fuzz/fuzz_egress.c supervisor/egress/head.c \
	    supervisor/egress/policy.c

# Each target for FUZZ_SECONDS, its corpus kept in build-fuzz/corpus-*.
$(FUZZ_BINS): | deps
fuzz: fuzz-deps $(FUZZ_BINS)
	@mkdir -p build-fuzz/corpus build-fuzz/corpus-jspan build-fuzz/corpus-sse
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=1024 \
	    -max_len=65536 build-fuzz/corpus tests/fuzz/seeds
	build-fuzz/fuzz_jspan -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=1024 -max_len=16384 build-fuzz/corpus-jspan \
	    tests/fuzz/seeds-jspan
	build-fuzz/fuzz_sse -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=1024 -max_len=16384 build-fuzz/corpus-sse \
	    tests/fuzz/seeds-sse
	@mkdir -p build-fuzz/corpus-egress
	build-fuzz/fuzz_egress -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=1024 -max_len=20000 build-fuzz/corpus-egress \
	    tests/fuzz/seeds-egress

HDRS := $(wildcard */*.h supervisor/*/*.h)
check-headers: | deps
	@for h in $(HDRS); do \
	    $(CC) -std=c11 $(CPPFLAGS) $(WARN) \
		$(call pc_cflags,$(PKGS_SUP) $(PKGS_SUP_HDR) $(PKGS_WRK)) \
		-fsyntax-only -x c $$h || exit 1; done

# systemd-analyze verify wants ExecStart to exist: check a copy that
# points at this build.
verify-units: all
	@mkdir -p $(O)/systemd
	sed 's|/usr/local/bin/agentz|$(CURDIR)/$(O)/agentz|' \
	    systemd/agentz@.service > $(O)/systemd/agentz@lint.service
	systemd-analyze verify $(O)/systemd/agentz@lint.service

# make install [PREFIX=/usr/local] [DESTDIR=]: the binaries, the unit
# (its paths under PREFIX), the man page, bash completion, README, docs/
# and examples/ in PREFIX/share/doc/agentz, and /etc/agentz/example.env
# (never over one that is there). make uninstall removes exactly that;
# the unit and example.env only while they are as installed (an edited
# one stays, and is named).
PREFIX ?= /usr/local
DOCDIR  = $(PREFIX)/share/doc/agentz
INST_DOCS := README.md docs/operating.md docs/security.md docs/internals.md \
	docs/report-demo.png examples/README.md examples/memory-ceiling.sh \
	examples/survive-kill.sh examples/agentz-example.env
INST_FILES = $(PREFIX)/bin/agentz $(PREFIX)/bin/agentz-worker \
	$(PREFIX)/share/man/man1/agentz.1 \
	$(PREFIX)/share/bash-completion/completions/agentz \
	$(addprefix $(DOCDIR)/,$(INST_DOCS))
PREFIXED = sed 's|/usr/local|$(PREFIX)|g'

# The unit and the man page are written with their paths under PREFIX
# straight into DESTDIR (no file in the build folder: two installs with
# different PREFIXes may run at once).
UNIT_DST = $(DESTDIR)/etc/systemd/system/agentz@.service
ENV_DST  = $(DESTDIR)/etc/agentz/example.env

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/systemd/system \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(DOCDIR)/docs \
	    $(DESTDIR)$(DOCDIR)/examples \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 755 $(O)/agentz $(O)/agentz-worker $(DESTDIR)$(PREFIX)/bin/
	$(PREFIXED) systemd/agentz@.service > $(UNIT_DST)
	chmod 644 $(UNIT_DST)
	$(PREFIXED) man/agentz.1 > $(DESTDIR)$(PREFIX)/share/man/man1/agentz.1
	chmod 644 $(DESTDIR)$(PREFIX)/share/man/man1/agentz.1
	install -m 644 man/agentz.bash \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/agentz
	for f in $(INST_DOCS); do \
	    install -m 644 $$f $(DESTDIR)$(DOCDIR)/$$f || exit 1; done
	install -d -m 755 $(DESTDIR)/etc/agentz
	test -e $(ENV_DST) || install -m 600 examples/agentz-example.env \
	    $(ENV_DST)

# The unit and example.env go only while they are as installed.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INST_FILES))
	@rmdir $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/examples \
	    $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	@if [ -e $(UNIT_DST) ]; then \
	    if $(PREFIXED) systemd/agentz@.service | cmp -s - $(UNIT_DST); \
	    then echo "rm -f $(UNIT_DST)"; rm -f $(UNIT_DST); \
	    else echo "uninstall: $(UNIT_DST) was changed since install:" \
		"kept"; fi; fi
	@if [ -e $(ENV_DST) ]; then \
	    if cmp -s examples/agentz-example.env $(ENV_DST); \
	    then echo "rm -f $(ENV_DST)"; rm -f $(ENV_DST); \
	    else echo "uninstall: $(ENV_DST) was changed since install:" \
		"kept"; fi; fi
	@rmdir $(DESTDIR)/etc/agentz 2>/dev/null || true

# clang-tidy: the checks in .clang-tidy, every C file of both binaries,
# findings as errors. cppcheck: variableScope off, KNF declares at the top
# of the block on purpose; Python's thread-state macros are opaque to it
# without its headers. The tools: scripts/install-deps lint.
LINT_SRC = $(sort $(COMMON_SRC) $(PROTO_SRC) $(wildcard sandbox/*.c) \
	$(SUP_SRC) supervisor/front/main.c $(WRK_SRC))
lint: check-headers verify-units
	scripts/install-deps lint
	clang-tidy -quiet $(LINT_SRC) -- -std=c11 $(CPPFLAGS) \
	    $(call pc_cflags,$(PKGS_SUP) $(PKGS_SUP_HDR) $(PKGS_WRK))
	cppcheck --enable=warning,style,performance,portability --std=c11 \
	    --error-exitcode=1 --inline-suppr --suppress=missingIncludeSystem \
	    --suppress=variableScope --suppress=constParameter \
	    -DPy_BEGIN_ALLOW_THREADS='{' -DPy_END_ALLOW_THREADS='}' \
	    -q -I. supervisor worker proto sandbox common

clean:
	rm -rf build build-san build-fuzz build-clang build-san-clang

-include $(shell find $(O) -name '*.d' 2>/dev/null)
