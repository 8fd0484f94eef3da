# dlockd: one Makefile builds the daemon, its tests and its clients.
#
#   make deps      install what a Debian machine lacks (apt-get)
#   make           build/dlockd
#   make run       private redis-server + dlockd on ./run/dlockd.sock
#   make test      unit and integration tests
#   make install   PREFIX=/usr/local DESTDIR=

PREFIX    ?= /usr/local
SYSCONFDIR ?= /etc
# systemd's unit directory for PREFIX=/usr (pkg-config systemd), else
# $(PREFIX)/lib/systemd/system; LIBDIR, PYTHONDIR and SHCLIENTDIR (the shell client) likewise.
UNITDIR   ?= $(if $(filter /usr,$(PREFIX)),$(or $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null),/lib/systemd/system),$(PREFIX)/lib/systemd/system)
LIBDIR    ?= $(PREFIX)/lib
SHCLIENTDIR ?= $(PREFIX)/share/dlock
# Debian's python3 reads /usr/lib/python3/dist-packages (packages) and
# /usr/local/lib/python3.X/dist-packages (the local admin's).
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(or $(shell $(firstword $(wildcard /usr/bin/python3) python3) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null),3)/dist-packages)
DESTDIR   ?=
VERSION   := 0.1.0

CC        ?= cc
CFLAGS    ?= -O2 -g
CPPFLAGS  ?=
LDFLAGS   ?=
BUILD     ?= build
WERROR    ?= -Werror
WARN      := -std=c11 -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes \
             -Wmissing-prototypes -Wformat=2 -Wcast-qual
DEFS      := -D_GNU_SOURCE -DDLOCKD_VERSION='"$(VERSION)"'
# A lock kind keeps its state in a byte area of the core's structs
# (daemon/lock/internal.h's kind areas), read as the kind's own struct:
# type-based alias analysis must not assume those never meet.
SAFE      := -fno-strict-aliasing
PKGS      := libuv hiredis uuid inih libsystemd openssl libmicrohttpd

# Recursive (=) so that pkg-config runs when a recipe runs, after `make deps`.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

ALL_CFLAGS = $(WARN) $(SAFE) $(DEFS) -I. $(CPPFLAGS) $(CFLAGS) $(PKG_CFLAGS)

# `make V=1` shows the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @echo "  $(1)	$(2)"
endif

PROTO_SRC  := proto/proto.c
CONF_SRC   := conf/conf.c conf/access.c
DAEMON_SRC := $(wildcard daemon/*.c daemon/*/*.c)
LIB_SRC    := $(PROTO_SRC) $(CONF_SRC)
CLIENT_SRC := clients/c/dlock.c
CLI_SRC    := clients/cli/dlock.c
LIBDLOCK_SOVERSION := 0

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
INTEG_TESTS := $(patsubst tests/integration/%.c,$(BUILD)/itests/%,$(wildcard tests/integration/test_*.c))
SUPPORT_SRC := $(wildcard tests/support/*.c)

.SECONDARY:

.PHONY: fuzz fuzz-build fuzz-short chaos chaos-short chaos-mutants metrics-test board-test conformance
.PHONY: fuzz-state fuzz-state-short fuzz-state-mutants
.PHONY: luacheck
.PHONY: clients-node clients-node-test clients-node-types
.PHONY: clients-go clients-go-test clients-build conformance
.PHONY: all deps deps-run deps-test deps-deb deps-chaos deb package-test run test bench unit integration integration-sanitized integration-valgrind sanitize-build clients-test \
        unit-build integration-build install uninstall clean

all: $(BUILD)/dlockd $(BUILD)/dlock $(BUILD)/libdlock.a $(BUILD)/libdlock.so

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The Lua scripts (daemon/backend/lua), composed and embedded in a header
# that scripts.c includes; the composed scripts land in $(BUILD)/gen/lua.
LUA_DIR     := daemon/backend/lua
LUA_SCRIPTS := $(patsubst $(LUA_DIR)/%.lua,%,$(wildcard $(LUA_DIR)/*.lua))
LUA_SRC     := $(wildcard $(LUA_DIR)/*.lua $(LUA_DIR)/part/*.lua)

$(BUILD)/gen/scripts_lua.h: $(LUA_SRC) $(LUA_DIR)/embed.sh
	$(call say,GEN,$@)
	$(Q)sh $(LUA_DIR)/embed.sh $(LUA_DIR) $(BUILD)/gen $(LUA_SCRIPTS)

# luacheck (.luacheckrc) reads the scripts Redis runs, as composed, and
# each part on its own; a file that includes parts is read composed only.
luacheck: $(BUILD)/gen/scripts_lua.h
	@echo "== luacheck $(LUA_DIR)"
	@luacheck -q --no-color $(shell grep -L '^--#include' $(LUA_SRC)) $(BUILD)/gen/lua

$(BUILD)/obj/daemon/backend/scripts.o: $(BUILD)/gen/scripts_lua.h
$(BUILD)/obj/daemon/backend/scripts.o: ALL_CFLAGS += -I$(BUILD)/gen

$(BUILD)/dlockd: $(call obj,$(DAEMON_SRC) $(LIB_SRC))
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# libdlock, static and shared (its objects are position-independent), and
# the dlock command built on it.
$(BUILD)/obj/clients/c/%.o: ALL_CFLAGS += -fPIC

$(BUILD)/libdlock.a: $(call obj,$(CLIENT_SRC))
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(BUILD)/libdlock.so: $(call obj,$(CLIENT_SRC))
	$(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libdlock.so.$(LIBDLOCK_SOVERSION) $(LDFLAGS) -o $@.$(LIBDLOCK_SOVERSION) $^
	$(Q)ln -sf libdlock.so.$(LIBDLOCK_SOVERSION) $@

$(BUILD)/dlock: $(call obj,$(CLI_SRC)) $(BUILD)/libdlock.a
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^

# Unit tests link the pure modules they test, nothing else.
$(BUILD)/tests/test_proto: $(call obj,tests/unit/test_proto.c $(PROTO_SRC))
# test_reply: each kind's words are its table's (daemon/lock/), which the
# lock manager's objects bring.
$(BUILD)/tests/test_reply: $(call obj,tests/unit/test_reply.c daemon/reply.c $(PROTO_SRC) \
                             $(wildcard daemon/lock/*.c) daemon/backend/backend.c \
                             daemon/util/timers.c daemon/util/heap.c daemon/util/hmap.c \
                             daemon/util/histo.c daemon/util/statefmt.c daemon/util/buf.c \
                             daemon/log.c $(CONF_SRC))
$(BUILD)/tests/test_conf: $(call obj,tests/unit/test_conf.c $(CONF_SRC))
$(BUILD)/tests/test_access: $(call obj,tests/unit/test_access.c conf/access.c daemon/access.c \
                              daemon/util/hmap.c)
$(BUILD)/tests/test_hmap: $(call obj,tests/unit/test_hmap.c daemon/util/hmap.c)
$(BUILD)/tests/test_heap: $(call obj,tests/unit/test_heap.c daemon/util/heap.c)
$(BUILD)/tests/test_statefmt: $(call obj,tests/unit/test_statefmt.c daemon/util/statefmt.c daemon/util/buf.c)
$(BUILD)/tests/test_pool: $(call obj,tests/unit/test_pool.c)
$(BUILD)/tests/test_keys: $(call obj,tests/unit/test_keys.c daemon/backend/keys.c)
$(BUILD)/tests/test_backend: $(call obj,tests/unit/test_backend.c daemon/backend/backend.c)
$(BUILD)/tests/test_quorum_vote: $(call obj,tests/unit/test_quorum_vote.c daemon/backend/quorum_vote.c)
$(BUILD)/tests/test_clock_skew: $(call obj,tests/unit/test_clock_skew.c daemon/backend/clock_skew.c)
$(BUILD)/tests/test_sentinel_reply: $(call obj,tests/unit/test_sentinel_reply.c daemon/backend/sentinel_reply.c)
$(BUILD)/tests/test_cluster_map: $(call obj,tests/unit/test_cluster_map.c daemon/backend/cluster_map.c)
$(BUILD)/tests/test_list: $(call obj,tests/unit/test_list.c daemon/backend/list_pure.c daemon/backend/scripts.c \
                            daemon/backend/resp_write.c daemon/backend/keys.c daemon/util/buf.c)
$(BUILD)/tests/test_cluster_multi: $(call obj,tests/unit/test_cluster_multi.c daemon/backend/cluster_multi.c \
                                     daemon/backend/backend.c daemon/log.c $(CONF_SRC))
$(BUILD)/tests/test_scripts: $(call obj,tests/unit/test_scripts.c daemon/backend/scripts.c \
                               daemon/backend/resp_write.c daemon/backend/keys.c daemon/util/buf.c)
$(BUILD)/tests/test_resp_write: $(call obj,tests/unit/test_resp_write.c daemon/backend/resp_write.c \
                                  daemon/backend/keys.c daemon/util/buf.c)
# The lock manager's tests (the core, and one per lock kind) share their
# world, tests/unit/lockmgr_support.c, and the fake backend, which runs the
# real scripts (scripts.c's calls and replies) on tests/unit/redis_model.c:
# Redis's commands in memory, and Lua 5.1 as Redis embeds it.
LUA_CFLAGS = $(shell pkg-config --cflags lua5.1 2>/dev/null)
LUA_LIBS   = $(shell pkg-config --libs lua5.1 2>/dev/null)
LOCKMGR_TEST_SRC := tests/unit/lockmgr_support.c tests/unit/fake_backend.c tests/unit/redis_model.c \
                    $(wildcard daemon/lock/*.c) daemon/backend/backend.c daemon/backend/scripts.c \
                    daemon/backend/resp_write.c daemon/backend/keys.c daemon/util/buf.c \
                    daemon/util/timers.c daemon/util/statefmt.c \
                    daemon/util/heap.c daemon/util/hmap.c daemon/util/histo.c daemon/log.c \
                    $(CONF_SRC)
LOCKMGR_TESTS := $(filter $(BUILD)/tests/test_lockmgr $(BUILD)/tests/test_lockmgr_%,$(UNIT_TESTS))
$(LOCKMGR_TESTS): $(BUILD)/tests/%: $(call obj,tests/unit/%.c $(LOCKMGR_TEST_SRC))
$(LOCKMGR_TESTS) $(BUILD)/tests/test_redis_model: UNIT_LIBS = $(LUA_LIBS)
$(BUILD)/obj/tests/unit/redis_model.o: ALL_CFLAGS += $(LUA_CFLAGS)
$(BUILD)/tests/test_redis_model: $(call obj,tests/unit/test_redis_model.c tests/unit/redis_model.c)

$(UNIT_TESTS):
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) $(UNIT_LIBS)

# Integration tests drive the real binaries through tests/support.
$(BUILD)/itests/test_%: $(BUILD)/obj/tests/integration/test_%.o $(call obj,$(SUPPORT_SRC) $(PROTO_SRC))
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS)

$(BUILD)/obj/tests/%.o: ALL_CFLAGS += $(CHECK_CFLAGS)

# The RESP connection's tests drive daemon/backend/resp.c directly.
RESP_SRC := daemon/backend/resp.c daemon/backend/resp_write.c daemon/backend/keys.c \
            daemon/backend/tls.c daemon/util/timers.c daemon/util/heap.c daemon/util/buf.c daemon/log.c
$(BUILD)/itests/test_resp: $(call obj,$(RESP_SRC) $(CONF_SRC))
# test_node drives daemon/backend/node.c directly; --wrap lets it fail chosen allocations.
$(BUILD)/itests/test_node: $(call obj,$(RESP_SRC) $(CONF_SRC) daemon/backend/node.c \
                             daemon/backend/node_batch.c daemon/backend/node_watch.c \
                             daemon/backend/scripts.c daemon/util/hmap.c \
                             daemon/util/histo.c)
$(BUILD)/itests/test_node: override LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
# test_cluster_open opens the Cluster topology with no server (open.c, for
# backend_node_opts, brings the other topologies); --wrap fails and counts allocations.
$(BUILD)/tests/test_cluster_open: $(call obj,tests/unit/test_cluster_open.c $(RESP_SRC) \
        $(CONF_SRC) $(filter-out $(RESP_SRC),$(wildcard daemon/backend/*.c)) \
        daemon/util/hmap.c daemon/util/histo.c)
$(BUILD)/tests/test_cluster_open: override LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free

# test_cluster picks lock names by slot with daemon/backend/keys.c.
$(BUILD)/itests/test_cluster: $(call obj,daemon/backend/keys.c)
$(BUILD)/itests/test_mlock_cluster: $(call obj,daemon/backend/keys.c)
$(BUILD)/itests/test_latch: $(call obj,daemon/backend/keys.c)

# The C client's tests link the library itself.
$(BUILD)/itests/test_libdlock: $(BUILD)/libdlock.a

# Debian packages and what proves each is there: a command (command -v), a
# pkg-config module, or a module of Debian's /usr/bin/python3. Each target
# installs what its group lacks, with apt-get (sudo when not root):
#   deps-run    build and run: compiler, libraries, redis-server, redis-cli, socat
#   deps-deb    make deb: the build's libraries and Debian's packaging tools
#   deps-chaos  make chaos, make bench: deps-run, python3, redis-sentinel
#   deps-test   make test: all of the above, Check, Lua 5.1's library (the
#               lock manager's unit tests run the scripts), valgrind, clang's
#               libFuzzer, openssl, luacheck, the metrics test's prometheus_client
#   deps        everything (= deps-test)
DEPS_BUILD_CMDS := cc:build-essential pkg-config:pkg-config
DEPS_BUILD_PKGS := libuv:libuv1-dev hiredis:libhiredis-dev uuid:uuid-dev inih:libinih-dev \
                   libsystemd:libsystemd-dev openssl:libssl-dev libmicrohttpd:libmicrohttpd-dev
DEPS_RUN_CMDS   := $(DEPS_BUILD_CMDS) redis-server:redis-server redis-cli:redis-tools socat:socat
DEPS_RUN_PKGS   := $(DEPS_BUILD_PKGS)
DEPS_DEB_CMDS   := $(DEPS_BUILD_CMDS) dpkg-buildpackage:dpkg-dev dh:debhelper \
                   dh_python3:dh-python lintian:lintian /usr/bin/python3:python3
DEPS_DEB_PKGS   := $(DEPS_BUILD_PKGS) systemd:systemd
DEPS_CHAOS_CMDS := $(DEPS_RUN_CMDS) python3:python3 redis-sentinel:redis-sentinel
# The clients in other languages: their toolchains, and Maven for Java.
DEPS_CLIENT_CMDS := go:golang-go javac:default-jdk-headless jar:default-jdk-headless node:nodejs npm:npm \
                    mvn:maven
# Java's Maven build (clients/java/pom.xml): the plugins and JUnit at the
# versions Debian ships, in /usr/share/maven-repo.
MAVEN_REPO := /usr/share/maven-repo
maven_plugin = $(MAVEN_REPO)/org/apache/maven/plugins/maven-$(1)-plugin/$(2)/maven-$(1)-plugin-$(2).jar:$(3)
DEPS_CLIENT_FILES := $(MAVEN_REPO)/org/junit/jupiter/junit-jupiter-engine/5.9.2/junit-jupiter-engine-5.9.2.jar:junit5 \
  $(call maven_plugin,clean,3.2.0,libmaven-clean-plugin-java) \
  $(call maven_plugin,resources,3.3.0,libmaven-resources-plugin-java) \
  $(call maven_plugin,compiler,3.10.1,libmaven-compiler-plugin-java) \
  $(call maven_plugin,surefire,2.22.3,libsurefire-java) \
  $(call maven_plugin,jar,3.3.0,libmaven-jar-plugin-java) \
  $(call maven_plugin,source,3.2.1,libmaven-source-plugin-java) \
  $(call maven_plugin,javadoc,3.4.1,libmaven-javadoc-plugin-java) \
  $(call maven_plugin,install,3.1.0,libmaven-install-plugin-java)
DEPS_TEST_CMDS  := $(sort $(DEPS_RUN_CMDS) $(DEPS_DEB_CMDS) $(DEPS_CHAOS_CMDS) $(DEPS_CLIENT_CMDS)) \
                   valgrind:valgrind clang:clang openssl:openssl luacheck:lua-check \
                   chromium:chromium
DEPS_TEST_PKGS  := $(sort $(DEPS_RUN_PKGS) $(DEPS_DEB_PKGS)) check:check lua5.1:liblua5.1-0-dev
DEPS_TEST_PYMODS := prometheus_client:python3-prometheus-client setuptools:python3-setuptools \
                    wheel:python3-wheel ensurepip:python3-venv
# Everything, as the one list `make deps` checks.
DEPS_CMDS := $(DEPS_TEST_CMDS)
DEPS_PKGS := $(DEPS_TEST_PKGS)

# $(call deps_install,TARGET,CMDS,PKGS,PYMODS,FUZZ,FILES): apt-get install
# the packages of the CMDS, PKGS, PYMODS and FILES (path:package) that are
# missing, and with FUZZ non-empty libclang-rt-dev when clang cannot link a
# libFuzzer target.
define deps_install
@missing=""; \
for d in $(2); do \
  command -v $${d%%:*} >/dev/null 2>&1 || missing="$$missing $${d#*:}"; \
done; \
for d in $(3); do \
  pkg-config --exists $${d%%:*} 2>/dev/null || missing="$$missing $${d#*:}"; \
done; \
for d in $(4); do \
  /usr/bin/python3 -c "import $${d%%:*}" >/dev/null 2>&1 || missing="$$missing $${d#*:}"; \
done; \
for d in $(6); do \
  [ -e $${d%%:*} ] || missing="$$missing $${d#*:}"; \
done; \
if [ -n "$(5)" ]; then \
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > /tmp/dlockd-fuzzcheck.$$$$.c; \
  if ! clang -fsanitize=fuzzer -o /tmp/dlockd-fuzzcheck.$$$$ \
      /tmp/dlockd-fuzzcheck.$$$$.c >/dev/null 2>&1; then missing="$$missing libclang-rt-dev"; fi; \
  rm -f /tmp/dlockd-fuzzcheck.$$$$ /tmp/dlockd-fuzzcheck.$$$$.c; \
fi; \
if [ -n "$$missing" ]; then \
  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
  echo "make $(1): installing$$missing"; \
  $$sudo apt-get update -q && \
  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
fi
endef

deps deps-test:
	$(call deps_install,$@,$(DEPS_TEST_CMDS),$(DEPS_TEST_PKGS),$(DEPS_TEST_PYMODS),fuzz,$(DEPS_CLIENT_FILES))

deps-run:
	$(call deps_install,$@,$(DEPS_RUN_CMDS),$(DEPS_RUN_PKGS))

deps-deb:
	$(call deps_install,$@,$(DEPS_DEB_CMDS),$(DEPS_DEB_PKGS))

deps-chaos:
	$(call deps_install,$@,$(DEPS_CHAOS_CMDS),$(DEPS_RUN_PKGS))

run: deps-run
	@$(MAKE) --no-print-directory all
	@sh tests/support/run-local.sh $(BUILD)/dlockd

# make test builds everything first (TEST_BUILD_JOBS compilers), then runs
# its jobs, each one suite or client, TEST_JOBS at a time, the longest first
# (tests/support/runjobs.py: a job's output is printed whole when it ends,
# then a table of every job's wall and CPU time). The tests' timing bounds
# hold on a 2-core machine running three jobs.
TEST_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS ?= 3

# The jobs. Every integration suite runs once, against the sanitized
# dlockd (or built with the sanitizers, SAN_SELF_TESTS), which checks all
# that the plain daemon's run would and more; the plain daemon is run by
# the suites in PLAIN_SUITES (limits and timeouts, where its own speed is
# the point; tagged requests' races and orders, which the plain daemon's
# speed changes; the harness's own check), the clients' tests, conformance,
# metrics, the board and chaos-short. make integration runs every suite
# plainly.
PLAIN_SUITES := $(filter %/test_server %/test_limits %/test_tags %/test_cluster_harness,$(INTEG_TESTS))
TEST_JOBLIST = luacheck docs-test unit \
  $(patsubst $(BUILD)/%,plain/%,$(PLAIN_SUITES)) blackhole-test \
  $(addprefix clients-,$(addsuffix -test,$(CLIENT_LANGS) python shell)) clients-node-types consumer-node \
  consumer-python consumer-go \
  $(addprefix conformance/,$(subst $(comma), ,$(CONFORMANCE_CLIENTS))) \
  metrics-test board-test chaos-short-stages chaos-short-netfaults consumer-java \
  $(patsubst $(BUILD)/%,san/%,$(SAN_SUITES)) fuzz-short fuzz-state-short package-test
# The valgrind suites run alone: dlockd under memcheck is many times
# slower, and a 300 ms watchdog lease shared with two other jobs on two
# cores ran out once (test_locks' lease_and_watchdog_mix: !LOST expired).
TEST_ALONE = $(patsubst $(BUILD)/%,vg/%,$(VALGRIND_SUITES))
comma := ,
# What each job takes (wall seconds on the 2-core machine, alone), for the
# order only: the longest start first. A job not named here counts 5 s.
TEST_EST := chaos-short-stages=120 san/itests/test_sentinel=47 san/itests/test_cluster=45 \
  san/itests/test_quorum=39 package-test=40 chaos-short-netfaults=27 vg/itests/test_locks=26 \
  vg/itests/test_server=22 san/itests/test_mlock_quorum=22 clients-go-test=17 \
  san/itests/test_replicas=16 san/itests/test_fairlock=16 san/itests/test_logs=15 \
  san/itests/test_mlock_cluster=13 san/itests/test_latch=12 san/itests/test_herd=20 san/itests/test_mlock=12 plain/itests/test_cluster_harness=11 \
  fuzz-short=10 san/itests/test_semaphore=10 clients-shell-test=9 san/tests/test_lockmgr=9 \
  san/itests/test_cli=9 san/itests/test_locks=8 board-test=8 conformance/java=7 \
  san/itests/test_resp=7 san/itests/test_rwlock=7 conformance/shell=7 \
  conformance/python-asyncio=7 conformance/node=6 clients-java-test=17 clients-node-types=12 \
  consumer-java=27 san/itests/test_tags=4 plain/itests/test_tags=3 san/itests/test_upgrade=38 consumer-node=6 consumer-python=6 consumer-go=6 \
  fuzz-state-short=40
test_est = $(or $(patsubst $(1)=%,%,$(filter $(1)=%,$(TEST_EST))),5)

# make check: the quick loop for a change (about a minute): the build, the
# unit tests, the plain integration suites of the daemon's core and one
# client's conformance run, through the same scheduler. make test runs all.
CHECK_SUITES := test_locks test_cancel test_tags test_server test_limits test_rwlock \
                test_semaphore test_mlock test_elect test_who test_signals test_list
CHECK_JOBLIST = luacheck unit $(addprefix plain/itests/,$(CHECK_SUITES)) conformance/python

.PHONY: check
check: deps-test
	@$(MAKE) --no-print-directory -j$(TEST_BUILD_JOBS) $(BUILD)/dlockd $(BUILD)/dlock unit-build \
	  $(addprefix $(BUILD)/itests/,$(CHECK_SUITES))
	@python3 tests/support/runjobs.py -j $(TEST_JOBS) --log-dir $(BUILD)/check-logs \
	  $(foreach j,$(CHECK_JOBLIST),$(j)=$(call test_est,$(j)))

test: deps-test
	@$(MAKE) --no-print-directory -j$(TEST_BUILD_JOBS) all unit-build integration-build \
	  sanitize-build fuzz-build clients-build $(NODE_TSC) $(BUILD)/docs/conf_keys
	@python3 tests/support/runjobs.py -j $(TEST_JOBS) --log-dir $(BUILD)/test-logs \
	  $(foreach j,$(TEST_JOBLIST),$(j)=$(call test_est,$(j))) \
	  $(foreach j,$(TEST_ALONE),$(j)!=$(call test_est,$(j)))

# The Go client (clients/go): standard library only, so no network. Its
# cache and GOPATH stay under $(BUILD)/go; binaries go to $(BUILD)/go/bin.
GO     ?= go
GO_ENV := GOCACHE=$(abspath $(BUILD)/go/cache) GOPATH=$(abspath $(BUILD)/go/path) \
          GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
clients-go:
	@mkdir -p $(BUILD)/go/bin
	cd clients/go && $(GO_ENV) $(GO) build -o $(abspath $(BUILD)/go/bin)/ ./...

# gofmt, go vet, then its tests (with the race detector) against the real daemon.
clients-go-test: $(BUILD)/dlockd
	@echo "== clients/go: gofmt, go vet, go test -race"
	@cd clients/go && test -z "$$(gofmt -l .)" || { gofmt -l .; echo "clients/go: run gofmt -w"; exit 1; }
	cd clients/go && $(GO_ENV) $(GO) vet ./...
	cd clients/go && $(GO_ENV) DLOCKD_BIN=$(abspath $(BUILD)/dlockd) $(GO) test -race -count=1 ./...

# The Go client as a user's module takes it (tests/consumer/go.py): the
# README's offline recipes (go mod edit -replace, go.work) in modules
# outside the tree, GOPROXY=off, then a lock against a live dlockd.
.PHONY: consumer-go
consumer-go: $(BUILD)/dlockd
	@echo "== tests/consumer/go.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/consumer/go.py

# Every client's own tests, against the real daemon: Python and shell here,
# the others in their clients-<lang>-test.
CLIENT_LANGS := go java node python-asyncio
clients-build: $(addprefix clients-,$(CLIENT_LANGS)) $(BUILD)/conformance/adapter-c
clients-test: $(addprefix clients-,$(addsuffix -test,$(CLIENT_LANGS) python shell))

.PHONY: clients-python-test clients-shell-test
clients-python-test: $(BUILD)/dlockd
	@echo "== tests/python/test_dlock.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_dlock.py

# The Python clients installed as clients/python/README.md says, offline, in
# a throwaway project outside the tree, then a lock (test_consumer.py).
.PHONY: consumer-python
consumer-python: $(BUILD)/dlockd
	@echo "== tests/python/test_consumer.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_consumer.py

clients-shell-test: $(BUILD)/dlockd
	@echo "== tests/shell/test_dlock_sh.sh"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) sh tests/shell/test_dlock_sh.sh

# The Node client (clients/node): nothing to compile; each file is syntax-checked
# and the package's files copied to $(BUILD)/node (what `npm pack` ships).
clients-node:
	@for f in clients/node/*.js clients/node/*.cjs clients/node/lib/*.cjs clients/node/test/*.js; do \
	  node --check "$$f" || exit 1; done
	@rm -rf $(BUILD)/node && mkdir -p $(BUILD)/node
	@cp -R clients/node/package.json clients/node/index.js clients/node/index.cjs clients/node/index.d.ts \
	  clients/node/index.d.cts clients/node/README.md clients/node/lib $(BUILD)/node/

# The Node client's own tests (node --test), against the real daemon.
clients-node-test: $(BUILD)/dlockd clients-node
	@echo "== clients/node/test"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) node --test clients/node/test/*.test.js

# The types checked as consumers see them: test/types.ts uses every export
# (test/types.test.js checks that it does) and is compiled in an ES module
# and in a CommonJS project (package.json's type) with module node16, which
# takes the package's exports (import, require), and in the CommonJS one
# with module commonjs too (its main and types), dlockd-client linked into
# each project's node_modules. TypeScript, the package's devDependency, is
# installed with npm into $(BUILD)/node-dev, never into the source tree.
NODE_TSC := $(BUILD)/node-dev/node_modules/.bin/tsc
$(NODE_TSC): clients/node/package.json
	@rm -rf $(BUILD)/node-dev && mkdir -p $(BUILD)/node-dev && cp clients/node/package.json $(BUILD)/node-dev/
	cd $(BUILD)/node-dev && npm install --include=dev --ignore-scripts --no-package-lock --no-audit --no-fund \
	  --loglevel=error
	@touch $@
clients-node-types: $(NODE_TSC)
	@for c in module:node16 commonjs:node16 commonjs:commonjs; do t=$${c%:*} m=$${c#*:}; d=$(BUILD)/node-types/$$t; \
	  echo "== clients/node: tsc --noEmit --strict --module $$m test/types.ts, in a project of type $$t"; \
	  rm -rf $$d && mkdir -p $$d/node_modules && printf '{ "type": "%s" }\n' $$t >$$d/package.json && \
	  cp clients/node/test/types.ts $$d/ && ln -s $(abspath clients/node) $$d/node_modules/dlockd-client && \
	  $(NODE_TSC) --noEmit --strict --target es2022 --module $$m $$d/types.ts || exit 1; done

# The Node client as a user installs it: tests/consumer/node.py runs the
# README's install steps in a project outside the checkout (npm offline),
# then ES module, CommonJS and TypeScript consumers against a live dlockd.
.PHONY: consumer-node
consumer-node: $(BUILD)/dlockd $(NODE_TSC)
	@echo "== tests/consumer/node.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) NODE_TSC=$(abspath $(NODE_TSC)) python3 tests/consumer/node.py

# The asyncio Python client (clients/python/dlock_asyncio.py): nothing to
# build but a syntax check; its own tests against the real daemon.
.PHONY: clients-python-asyncio clients-python-asyncio-test
clients-python-asyncio:
	@PYTHONPYCACHEPREFIX=$(abspath $(BUILD))/pycache python3 -m py_compile \
	  clients/python/dlock.py clients/python/dlock_asyncio.py

clients-python-asyncio-test: $(BUILD)/dlockd clients-python-asyncio
	@echo "== tests/python/test_dlock_asyncio.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_dlock_asyncio.py
	@echo "== tests/python/test_dlock_asyncio_elect.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_dlock_asyncio_elect.py
	@echo "== tests/python/test_dlock_asyncio_mlock.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_dlock_asyncio_mlock.py
	@echo "== tests/python/test_dlock_list.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/python/test_dlock_list.py

# The Prometheus endpoint, scraped for real and parsed with Debian's
# python3-prometheus-client; against the plain and the sanitized daemon.
metrics-test: $(BUILD)/dlockd $(BUILD)/dlock sanitize-build
	@echo "== tests/metrics/test_metrics.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) DLOCK_BIN=$(abspath $(BUILD)/dlock) /usr/bin/python3 tests/metrics/test_metrics.py
	@echo "== tests/metrics/test_metrics.py (sanitized)"
	@DLOCKD_BIN=$(abspath $(BUILD)/san/dlockd) DLOCK_BIN=$(abspath $(BUILD)/dlock) /usr/bin/python3 tests/metrics/test_metrics.py

# The live board (GET /) in headless Chromium, driven over its DevTools
# pipe: a holder's row and its waiter appear, and go when it closes.
board-test: $(BUILD)/dlockd sanitize-build
	@echo "== tests/metrics/test_board.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) /usr/bin/python3 tests/metrics/test_board.py
	@echo "== tests/metrics/test_board.py (sanitized)"
	@DLOCKD_BIN=$(abspath $(BUILD)/san/dlockd) /usr/bin/python3 tests/metrics/test_board.py

# Two integration suites with dlockd under valgrind memcheck: a memory error
# or a definitely lost block fails the test that stopped the daemon.
VALGRIND_SUITES := $(BUILD)/itests/test_server $(BUILD)/itests/test_locks

integration-valgrind: $(patsubst $(BUILD)/%,vg/%,$(VALGRIND_SUITES))

# vg/itests/<suite>: one suite with dlockd under valgrind.
vg/%: $(BUILD)/% $(BUILD)/dlockd
	@echo "== $(BUILD)/$* (dlockd under valgrind)"
	@DLOCKD_REAL_BIN=$(abspath $(BUILD)/dlockd) \
	  DLOCKD_BIN=$(abspath tests/support/valgrind-dlockd.sh) CK_DEFAULT_TIMEOUT=120 $(BUILD)/$*

# The daemon again with AddressSanitizer and UndefinedBehaviorSanitizer; the
# integration tests run against it too. Any report makes dlockd exit non-zero,
# which the harness turns into a failed test (leaks are reported at exit).
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=all

# The tests that link daemon code themselves (the RESP connection, a backend
# node, the lock manager) are built with the sanitizers too, and run so;
# the other integration tests run against the sanitized dlockd.
SAN_SELF_TESTS := $(filter %/test_resp %/test_node,$(INTEG_TESTS)) $(LOCKMGR_TESTS) \
                  $(BUILD)/tests/test_proto

sanitize-build:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/san CFLAGS="$(SAN_FLAGS)" \
	  LDFLAGS="-fsanitize=address,undefined" $(BUILD)/san/dlockd \
	  $(patsubst $(BUILD)/%,$(BUILD)/san/%,$(SAN_SELF_TESTS))

# test_cluster_harness runs no dlockd: once, in the plain run, is enough.
SAN_SKIP := $(filter %/test_cluster_harness,$(INTEG_TESTS))

SAN_SUITES := $(filter-out $(SAN_SKIP),$(INTEG_TESTS)) $(LOCKMGR_TESTS) $(BUILD)/tests/test_proto
integration-sanitized: $(patsubst $(BUILD)/%,san/%,$(SAN_SUITES))

# san/itests/<suite> (or san/tests/<lockmgr test>): one suite against the
# sanitized dlockd, or built with the sanitizers itself (SAN_SELF_TESTS).
san/%: $(BUILD)/% $(BUILD)/dlock
	@t=$(BUILD)/$*; case " $(SAN_SELF_TESTS) " in *" $$t "*) t=$(BUILD)/san/$*;; esac; \
	  echo "== $$t (sanitized)"; \
	  ASAN_OPTIONS=detect_leaks=1:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1 \
	  DLOCKD_BIN=$(abspath $(BUILD)/san/dlockd) DLOCK_BIN=$(abspath $(BUILD)/dlock) \
	  CK_DEFAULT_TIMEOUT=60 $$t

unit-build: $(UNIT_TESTS)
integration-build: $(INTEG_TESTS)

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; CK_DEFAULT_TIMEOUT=30 $$t; done

# make test runs the topology suites (many server processes, failovers)
# and the slowest single-Redis ones (replication acks, log files, fair
# queues: each waits out leases) once, against the sanitized daemon
# (integration-sanitized): the same tests with more checked, and their
# timing bounds allow for its speed; make chaos-short runs the plain
# daemon through every topology. make integration alone runs them all.
SAN_ONLY := $(filter %/test_cluster %/test_mlock_cluster %/test_mlock_quorum %/test_sentinel %/test_quorum %/test_elect_topo %/test_replicas %/test_logs %/test_fairlock,$(INTEG_TESTS))
INTEG_SKIP ?=

integration: $(patsubst $(BUILD)/%,plain/%,$(filter-out $(INTEG_SKIP),$(INTEG_TESTS))) blackhole-test

# plain/itests/<suite>: one suite against the plain dlockd.
plain/%: $(BUILD)/% $(BUILD)/dlockd $(BUILD)/dlock
	@echo "== $(BUILD)/$*"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) DLOCK_BIN=$(abspath $(BUILD)/dlock) \
	  CK_DEFAULT_TIMEOUT=60 $(BUILD)/$*

.PHONY: blackhole-test
blackhole-test: $(BUILD)/dlockd
	@echo "== tests/integration/test_blackhole.py (a black-holed link through tests/chaos/faultproxy.py)"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/integration/test_blackhole.py

# The docs that tests keep true (tests/docs): the README's socat tour
# replayed against a live dlockd, every config key in the man page and the
# shipped file, every verb in PROTOCOL.md and dlock(1), the man pages free
# of groff warnings, and every relative Markdown link pointing at a file.
.PHONY: docs-test
$(BUILD)/docs/conf_keys: $(call obj,tests/docs/conf_keys.c $(CONF_SRC))
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

docs-test: $(BUILD)/dlockd $(BUILD)/docs/conf_keys
	@echo "== tests/docs/test_tour.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/docs/test_tour.py
	@echo "== tests/docs/test_conf_keys.py"
	@CONF_KEYS_BIN=$(abspath $(BUILD)/docs/conf_keys) python3 tests/docs/test_conf_keys.py
	@echo "== tests/docs/test_verbs.py"
	@python3 tests/docs/test_verbs.py
	@echo "== tests/docs/test_man_warnings.sh"
	@sh tests/docs/test_man_warnings.sh
	@echo "== tests/docs/test_md_links.py"
	@python3 tests/docs/test_md_links.py

MANDIR ?= $(PREFIX)/share/man

# libFuzzer targets for proto/ and conf/ (clang only); see tests/fuzz/README.md.
FUZZ_CC      ?= clang
FUZZ_FLAGS   := -std=c11 -g -O1 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all
FUZZ_TARGETS := proto conf
FUZZ_SECONDS ?= 60

$(BUILD)/fuzz/fuzz_proto: tests/fuzz/fuzz_proto.c $(PROTO_SRC) proto/proto.h
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_proto.c $(PROTO_SRC)

$(BUILD)/fuzz/fuzz_conf: tests/fuzz/fuzz_conf.c $(CONF_SRC) conf/conf.h conf/access.h
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_conf.c $(CONF_SRC) \
	  $(shell pkg-config --cflags --libs inih)

fuzz-build: $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))

# $(call fuzz_run,SECONDS): each target grows a copy of its seeds in
# $(BUILD)/fuzz/corpus-<target>; a crash is saved as
# $(BUILD)/fuzz/<target>-crash-* and fails the run.
define fuzz_run
set -e; for t in $(FUZZ_TARGETS); do \
  echo "== fuzz_$$t, $(1) s"; \
  mkdir -p $(BUILD)/fuzz/corpus-$$t; \
  cp tests/fuzz/corpus/$$t/* $(BUILD)/fuzz/corpus-$$t/; \
  $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(1) -print_final_stats=1 \
    -artifact_prefix=$(BUILD)/fuzz/$$t- $(BUILD)/fuzz/corpus-$$t 2>$(BUILD)/fuzz/run-$$t.log || \
    { tail -n 40 $(BUILD)/fuzz/run-$$t.log; exit 1; }; \
  grep -E '^stat::number_of_executed_units|^Done' $(BUILD)/fuzz/run-$$t.log || true; \
done
endef

fuzz: deps-test fuzz-build
	@$(call fuzz_run,$(FUZZ_SECONDS))

# The short pass `make test` runs: every seed once, then a fixed number of
# runs from a fixed random seed on the seeds alone, so that the same tree
# always fuzzes the same inputs (make fuzz explores).
FUZZ_SHORT_RUNS := 40000

fuzz-short: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz_$$t, every seed once, then $(FUZZ_SHORT_RUNS) runs from seed 1"; \
	  $(BUILD)/fuzz/fuzz_$$t tests/fuzz/corpus/$$t/* >$(BUILD)/fuzz/seeds-$$t.log 2>&1 || \
	    { cat $(BUILD)/fuzz/seeds-$$t.log; exit 1; }; \
	  rm -rf $(BUILD)/fuzz/short-$$t; mkdir -p $(BUILD)/fuzz/short-$$t; \
	  cp tests/fuzz/corpus/$$t/* $(BUILD)/fuzz/short-$$t/; \
	  $(BUILD)/fuzz/fuzz_$$t -seed=1 -runs=$(FUZZ_SHORT_RUNS) -print_final_stats=1 \
	    -artifact_prefix=$(BUILD)/fuzz/$$t- $(BUILD)/fuzz/short-$$t \
	    2>$(BUILD)/fuzz/short-$$t.log || { tail -n 40 $(BUILD)/fuzz/short-$$t.log; exit 1; }; \
	  grep -E '^Done' $(BUILD)/fuzz/short-$$t.log || true; \
	done

# The stateful fuzzer (tests/fuzz/README.md): a seeded random walk of many
# clients against the sanitized dlockd, two daemons on one redis-server, with
# Redis paused, stopped, cut and delayed, slow readers, reloads, and a mode
# whose Redis replies are mangled; the session and lock state machines are
# checked at every step and at the end. fuzz-state walks FUZZ_STATE_SECONDS
# from a random seed (it prints it); fuzz-state-short walks fixed seeds, about
# 30 s; fuzz-state-mutants puts issue 36's bugs back one at a time. The
# short run is a job of make test; all three run in make chaos.
FUZZ_STATE_SECONDS ?= 600

fuzz-state: sanitize-build
	@python3 tests/fuzz/test_mangle.py && python3 tests/fuzz/test_fuzz_state.py && \
	  python3 tests/fuzz/test_fuzz_state_limits.py
	@FUZZ_STATE_SECONDS=$(FUZZ_STATE_SECONDS) python3 tests/fuzz/fuzz_state.py \
	  --dlockd $(abspath $(BUILD)/san/dlockd)

fuzz-state-short: sanitize-build
	@echo "== tests/fuzz/fuzz_state.py --short"
	@python3 tests/fuzz/test_mangle.py && python3 tests/fuzz/test_fuzz_state.py && \
	  python3 tests/fuzz/test_fuzz_state_limits.py
	@python3 tests/fuzz/fuzz_state.py --short --dlockd $(abspath $(BUILD)/san/dlockd)

fuzz-state-mutants:
	@python3 tests/fuzz/fuzz_state_mutants.py

# Fault injection against three daemons sharing one Redis, then on a
# Sentinel topology (a primary, two replicas, three Sentinels), then on a
# Redis Cluster (3 primaries, 3 replicas), then on a Redlock quorum of five
# independent redis-servers: make chaos runs the full suite (about 200 s),
# make test a short one (about 65 s). Then the network faults (netfaults.py:
# every daemon reaches Redis through its own fault-proxy link, four
# topologies; full about 90 s, short about 25 s) and, in make chaos only,
# the clock skew stages (clockskew.py, about 30 s) and the mutant daemons
# (chaos-mutants, about 9 minutes: a build and a short netfaults run each,
# or a short chaos.py stage: the election's, the hot-name one's, the live
# restore's). chaos.py's last stage hands one dlockd over to a new process
# of itself again and again (issue 39; about 15 s short).
chaos: deps-chaos
	@$(MAKE) --no-print-directory $(BUILD)/dlockd
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/chaos/chaos.py
	@python3 tests/chaos/test_faultproxy.py && python3 tests/chaos/test_history.py
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/chaos/netfaults.py
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/chaos/clockskew.py
	@$(MAKE) --no-print-directory chaos-mutants
	@$(MAKE) --no-print-directory fuzz-state fuzz-state-mutants

chaos-short: chaos-short-stages chaos-short-netfaults

.PHONY: chaos-short-stages chaos-short-netfaults
chaos-short-stages: $(BUILD)/dlockd
	@echo "== tests/chaos/chaos.py --short"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/chaos/chaos.py --short

chaos-short-netfaults: $(BUILD)/dlockd
	@echo "== tests/chaos/test_faultproxy.py, netfaults.py --short"
	@python3 tests/chaos/test_faultproxy.py && python3 tests/chaos/test_history.py
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/chaos/netfaults.py --short

# Mutant daemons (tests/chaos/mutants.py): each must fail netfaults' checks
# or its chaos.py stage's.
chaos-mutants:
	@python3 tests/chaos/mutants.py

# The client conformance suite (tests/conformance/README.md): every scenario
# against every client's adapter whose adapter is there. It builds the C
# adapter; the other compiled adapters come from clients-go and clients-java
# (and clients-node installs the Node client's dependencies), which are not
# prerequisites here: CONFORMANCE_CLIENTS=c,python,... names the clients
# that must run (a missing adapter then fails the run).
# Every client must be there: a missing adapter fails the run.
CONFORMANCE_CLIENTS ?= c,python,python-asyncio,shell,go,java,node
conformance: $(BUILD)/dlockd $(BUILD)/libdlock.a $(BUILD)/libdlock.so clients-build
	@echo "== tests/conformance/run.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) BUILD=$(abspath $(BUILD)) \
	  CONFORMANCE_CLIENTS=$(CONFORMANCE_CLIENTS) python3 tests/conformance/run.py

# conformance/<client>: one client's run (its adapter built already, as
# make test's build step does).
conformance/%: $(BUILD)/dlockd
	@echo "== tests/conformance/run.py ($*)"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) BUILD=$(abspath $(BUILD)) \
	  CONFORMANCE_CLIENTS=$* python3 tests/conformance/run.py

$(BUILD)/conformance/adapter-c: tests/conformance/adapter_c.c clients/c/dlock.h $(BUILD)/libdlock.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(WARN) -D_GNU_SOURCE -I. $(CFLAGS) -pthread -o $@ $< $(BUILD)/libdlock.a $(LDFLAGS)

# Benchmarks: numbers, not tests; see tests/bench/README.md.
bench: deps-chaos
	@$(MAKE) --no-print-directory $(BUILD)/dlockd $(BUILD)/dlock-bench \
	  $(if $(shell command -v go 2>/dev/null),clients-go) \
	  $(if $(shell command -v mvn 2>/dev/null),clients-java)
	@bash tests/bench/run.sh $(BUILD)/dlockd $(BUILD)/dlock-bench

# dlock-bench blocking drives libdlock.
$(BUILD)/dlock-bench: tests/bench/dlock_bench.c clients/c/dlock.h $(BUILD)/libdlock.a
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(WARN) -D_GNU_SOURCE -I. -O2 -o $@ $< $(BUILD)/libdlock.a $(LDFLAGS)

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(SYSCONFDIR)/dlockd $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(PYTHONDIR) $(DESTDIR)$(SHCLIENTDIR)
	install -m 0755 $(BUILD)/dlockd $(DESTDIR)$(PREFIX)/sbin/dlockd
	install -m 0755 $(BUILD)/dlock $(DESTDIR)$(PREFIX)/bin/dlock
	install -m 0644 $(BUILD)/libdlock.a $(DESTDIR)$(LIBDIR)/libdlock.a
	install -m 0755 $(BUILD)/libdlock.so.$(LIBDLOCK_SOVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libdlock.so.$(LIBDLOCK_SOVERSION) $(DESTDIR)$(LIBDIR)/libdlock.so
	install -m 0644 clients/c/dlock.h $(DESTDIR)$(PREFIX)/include/dlock.h
	sed 's|@PREFIX@|$(PREFIX)|g; s|@VERSION@|$(VERSION)|g; s|^libdir=.*|libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	  clients/c/dlock.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/dlock.pc
	install -m 0644 clients/python/dlock.py $(DESTDIR)$(PYTHONDIR)/dlock.py
	install -m 0644 clients/python/dlock_asyncio.py $(DESTDIR)$(PYTHONDIR)/dlock_asyncio.py
	install -m 0644 clients/shell/dlock.sh $(DESTDIR)$(SHCLIENTDIR)/dlock.sh
	@# The configuration may hold the Redis password: 0640, group dlockd's
	@# (the service's) when that group exists and this is the real system.
	@conf=$(DESTDIR)$(SYSCONFDIR)/dlockd/dlockd.conf; \
	if [ -e $$conf ]; then echo "keeping existing $$conf"; \
	else echo "install -m 0640 conf/dlockd.conf $$conf"; install -m 0640 conf/dlockd.conf $$conf; \
	  if [ -z "$(DESTDIR)" ] && getent group dlockd >/dev/null 2>&1 && chgrp dlockd $$conf; then \
	    echo "chgrp dlockd $$conf"; \
	  else echo "note: $$conf is $$(stat -c '%U:%G %a' $$conf), not yet group dlockd's:" \
	    "after systemd-sysusers has made the dlockd user, chgrp dlockd $(SYSCONFDIR)/dlockd/dlockd.conf" \
	    "or dlockd.service cannot read it"; fi; \
	fi
	sed 's|@SBINDIR@|$(PREFIX)/sbin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' systemd/dlockd.service.in \
	  > $(DESTDIR)$(UNITDIR)/dlockd.service
	install -m 0644 systemd/dlockd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/dlockd.conf
	install -m 0644 systemd/dlockd.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/dlockd.conf
	install -m 0644 clients/cli/dlock.1 $(DESTDIR)$(MANDIR)/man1/dlock.1
	install -m 0644 conf/dlockd.conf.5 $(DESTDIR)$(MANDIR)/man5/dlockd.conf.5
	install -m 0644 daemon/dlockd.8 $(DESTDIR)$(MANDIR)/man8/dlockd.8
	@if [ -z "$(DESTDIR)" ]; then echo ldconfig; PATH="$$PATH:/sbin:/usr/sbin" ldconfig || \
	  echo "note: ldconfig failed; run it as root so that libdlock.so.$(LIBDLOCK_SOVERSION) is found"; fi

# Leaves $(SYSCONFDIR)/dlockd/dlockd.conf, which may have been edited.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/sbin/dlockd $(DESTDIR)$(PREFIX)/bin/dlock \
	  $(DESTDIR)$(LIBDIR)/libdlock.a $(DESTDIR)$(LIBDIR)/libdlock.so \
	  $(DESTDIR)$(LIBDIR)/libdlock.so.$(LIBDLOCK_SOVERSION) \
	  $(DESTDIR)$(PREFIX)/include/dlock.h $(DESTDIR)$(LIBDIR)/pkgconfig/dlock.pc \
	  $(DESTDIR)$(UNITDIR)/dlockd.service \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/dlockd.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/dlockd.conf \
	  $(DESTDIR)$(MANDIR)/man1/dlock.1 $(DESTDIR)$(MANDIR)/man5/dlockd.conf.5 \
	  $(DESTDIR)$(MANDIR)/man8/dlockd.8 \
	  $(DESTDIR)$(PYTHONDIR)/dlock.py $(DESTDIR)$(PYTHONDIR)/__pycache__/dlock.*.pyc \
	  $(DESTDIR)$(PYTHONDIR)/dlock_asyncio.py $(DESTDIR)$(PYTHONDIR)/__pycache__/dlock_asyncio.*.pyc \
	  $(DESTDIR)$(SHCLIENTDIR)/dlock.sh
	-@rmdir $(DESTDIR)$(SHCLIENTDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ]; then echo ldconfig; PATH="$$PATH:/sbin:/usr/sbin" ldconfig || true; fi
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/dlockd/dlockd.conf (remove it by hand if no longer wanted)"

# Debian packages (debian/): dpkg-buildpackage -us -uc -b runs in a copy of
# the tree under $(DEB_DIR) (keep DEB_DIR under $(BUILD) or outside the
# tree), so the tree and its parent stay clean. The .debs, the .ddeb debug
# symbols, .changes, .buildinfo and build.log land in $(DEB_DIR).
DEB_DIR ?= $(BUILD)/deb

deb: deps-deb
	@rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	@tar -cf - --exclude=./.git --exclude=./build --exclude=./run --exclude='./$(BUILD)' \
	  --exclude='./$(DEB_DIR)' --exclude=__pycache__ . | tar -xf - -C $(DEB_DIR)/src
	$(call say,DEB,$(DEB_DIR) (dpkg-buildpackage -us -uc -b; log in $(DEB_DIR)/build.log))
	@cd $(DEB_DIR)/src && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$$HOME" LC_ALL=C.UTF-8 \
	  DEB_BUILD_OPTIONS="$$DEB_BUILD_OPTIONS" dpkg-buildpackage -us -uc -b -Jauto \
	  >../build.log 2>&1 || { tail -n 40 ../build.log; echo "make deb: failed, see $(DEB_DIR)/build.log"; exit 1; }
	@rm -rf $(DEB_DIR)/src
	@ls -1 $(DEB_DIR)/*.deb

# Builds the packages, installs them on this machine, checks and purges them
# (root only; see tests/package/test_deb.sh).
package-test:
	@echo "== tests/package/test_deb.sh"
	@BUILD=$(BUILD) DEB_DIR=$(DEB_DIR) sh tests/package/test_deb.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The Java client (clients/java, JDK 17, no dependencies): Maven, offline, with
# Debian's packaged plugins (clients/java/.mvn: -o and the settings). Its build
# goes under $(BUILD)/java (target/, test-target/ and the local repository
# m2/); $(BUILD)/dlock.jar (the library) and $(BUILD)/dlock-tests.jar (the
# conformance adapter and the benchmark) are copies of its jars.
MVN          ?= mvn
JAVA_VERSION := $(shell sed -n 's:^  <version>\(.*\)</version>$$:\1:p' clients/java/pom.xml)
JAVA_SRC     := clients/java/pom.xml $(shell find clients/java/src -name '*.java' 2>/dev/null)
JAVA_MVN      = cd clients/java && $(MVN) -B -Dmaven.repo.local=$(abspath $(BUILD))/java/m2
.PHONY: clients-java clients-java-test

clients-java: $(BUILD)/dlock.jar

$(BUILD)/dlock.jar: $(JAVA_SRC)
	$(call say,MVN,$@)
	$(Q)$(JAVA_MVN) -q -Ddlock.target=$(abspath $(BUILD))/java/target \
	  -DskipTests -Dmaven.javadoc.skip -Dmaven.source.skip package
	$(Q)cp $(BUILD)/java/target/dlock-$(JAVA_VERSION)-tests.jar $(BUILD)/dlock-tests.jar
	$(Q)cp $(BUILD)/java/target/dlock-$(JAVA_VERSION).jar $@

# mvn package as clients/java/README.md has it: the JUnit 5 tests (against a
# real dlockd and redis-server), the jars; then what went into them.
clients-java-test: $(BUILD)/dlock.jar $(BUILD)/dlockd
	@echo "== clients/java: mvn package"
	$(Q)DLOCKD_BIN=$(abspath $(BUILD)/dlockd) $(JAVA_MVN) \
	  -Ddlock.target=$(abspath $(BUILD))/java/test-target package
	$(Q)python3 tests/java/check_jars.py $(BUILD)/java/test-target dlock-$(JAVA_VERSION)

# A Java project outside the repository uses the client as clients/java/README.md says.
.PHONY: consumer-java
consumer-java: $(BUILD)/dlockd
	@echo "== tests/java/test_consumer.py"
	@DLOCKD_BIN=$(abspath $(BUILD)/dlockd) python3 tests/java/test_consumer.py
