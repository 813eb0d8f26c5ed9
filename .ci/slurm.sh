#!/usr/bin/env bash
# A single-node SLURM on loopback for tests/test_slurm.py (and for trying the SLURM profile locally):
#
#   bash .ci/slurm.sh start    # install (Debian packages, first time) and start; idempotent
#   bash .ci/slurm.sh status   # exit status 0 when the node is up and slurmdbd answers
#   bash .ci/slurm.sh stop     # cancel this cluster's jobs and stop every daemon it started
#
# Runs as root on Debian (12) without systemd (a container or VM): munged, MariaDB, slurmdbd,
# slurmctld and slurmd are started directly, each with a pid file under $STATE_DIR, and stopped by
# those pids.  slurmdbd (on MariaDB) is there because the Snakemake SLURM executor reads job states
# with sacct.  No cgroups: proctrack/linuxproc, task/none, jobacct_gather/linux.  One node,
# `localhost` (127.0.0.1), with this machine's CPUs and memory (from `slurmd -C`) in the partition
# `debug` (the default), consumable cores and memory (select/cons_tres, CR_Core_Memory), and one
# generic resource gpu:1 on /dev/null, so that jobs of `device: cuda|auto` configs, which request a
# GPU (--gres=gpu:1), are scheduled too (no real device behind it; torch sees none and `auto` runs on
# the CPU).  Cluster `logzbench`, account `logzbench`, user root.  MariaDB has its own data
# directory and socket under $STATE_DIR and no TCP port; an already running munged is used as is.
#
# It writes /etc/slurm/slurm.conf, gres.conf and slurmdbd.conf (the place Debian's SLURM commands
# read) and refuses to touch a slurm.conf it did not write.  Environment:
#   LOGZBENCH_SLURM_STATE   state, logs and pid files (default /var/lib/logzbench-slurm)
#   LOGZBENCH_SLURM_NO_INSTALL=1   never run apt-get (fail if the packages are missing)
set -euo pipefail

STATE_DIR="${LOGZBENCH_SLURM_STATE:-/var/lib/logzbench-slurm}"
CONF_DIR=/etc/slurm
MARKER="# written by logzbench .ci/slurm.sh"
CLUSTER=logzbench
ACCOUNT=logzbench
NODE=localhost
PARTITION=debug
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_RUN="$STATE_DIR/mariadb"  # socket, pid file and log of MariaDB (owned by mysql)
DB_SOCKET="$DB_RUN/mysqld.sock"
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)

CONF_CHANGED=0

log() { echo "slurm.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# --------------------------------------------------------------------------- helpers
pid_alive() {  # pid file -> 0 when its process runs
    local f=$1 pid
    [[ -s $f ]] || return 1
    pid=$(cat "$f" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

wait_for() {  # seconds description command... -> 0 once the command succeeds
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 2; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    log "timed out after ${secs}s waiting for $what"
    return 1
}

stop_pidfile() {  # pid file, name: TERM, wait up to 30 s, then KILL
    local f=$1 name=$2 pid i
    pid_alive "$f" || { rm -f "$f"; return 0; }
    pid=$(cat "$f")
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
        sleep 0.5
    done
    log "$name (pid $pid) did not stop; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
}

show_logs() {  # the tail of every daemon log, for a failed start
    local f
    for f in "$STATE_DIR"/log/*.log; do
        [[ -f $f ]] || continue
        echo "----- $f (last 20 lines)" >&2
        tail -n 20 "$f" >&2 || true
    done
}

# --------------------------------------------------------------------------- installation
install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    [[ ${LOGZBENCH_SLURM_NO_INSTALL:-0} != 1 ]] || die "missing Debian packages: ${missing[*]}"
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get (Debian/Ubuntu only)"
    log "installing ${missing[*]} (apt-get)"
    # keep the packages' maintainer scripts from starting the daemons (this script starts them)
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    fi
    local rc=0
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${PACKAGES[@]}"; } >"$STATE_DIR/log/apt-get.log" 2>&1 || rc=$?
    ((own_policy)) && rm -f "$policy"
    if ((rc)); then
        tail -n 30 "$STATE_DIR/log/apt-get.log" >&2
        die "apt-get failed ($rc); see $STATE_DIR/log/apt-get.log"
    fi
}

# --------------------------------------------------------------------------- configuration
write_config() {
    mkdir -p "$CONF_DIR"
    if [[ -f $CONF_DIR/slurm.conf ]] && ! grep -qF "$MARKER" "$CONF_DIR/slurm.conf"; then
        die "$CONF_DIR/slurm.conf exists and was not written by this script; not touching a real cluster's configuration"
    fi
    # this machine's CPUs, topology and memory as slurmd sees them (a node configured with more
    # than that would be drained)
    local hw cpus mem
    hw=$(slurmd -C | head -n 1) || die "slurmd -C failed"
    cpus=$(grep -o 'CPUs=[0-9]*' <<<"$hw" | cut -d= -f2)
    mem=$(grep -o 'RealMemory=[0-9]*' <<<"$hw" | cut -d= -f2)
    [[ -n $cpus && -n $mem ]] || die "cannot read CPUs / RealMemory from 'slurmd -C': $hw"
    local topo
    topo=$(grep -o 'Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$hw" || true)
    cat >"$CONF_DIR/slurm.conf.new" <<EOF
$MARKER (single-node test cluster; bash .ci/slurm.sh stop)
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups (no systemd here): plain process tracking, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
# keep the job comment (the executor plugin writes rule and wildcards there) for sacct
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
# finished jobs stay in slurmctld 5 minutes (squeue); sacct has them for good
MinJobAge=300
KillWait=10
# a job without --mem gets this much per CPU (not the whole node)
DefMemPerCPU=1000
InactiveLimit=0
OverTimeLimit=0
Waittime=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus $topo RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    if ! cmp -s "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"; then
        CONF_CHANGED=1
    fi
    mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
    cat >"$CONF_DIR/gres.conf" <<EOF
$MARKER
# a GPU on /dev/null: jobs asking for one are scheduled; nothing real is bound (task/none)
NodeName=$NODE Name=gpu File=/dev/null Count=1
EOF
    if [[ ! -s $STATE_DIR/db.pass ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$STATE_DIR/db.pass")
    fi
    (umask 077 && cat >"$CONF_DIR/slurmdbd.conf" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$STATE_DIR/run/slurmdbd.pid
LogFile=$STATE_DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DB_NAME
StorageUser=$DB_USER
StoragePass=$(cat "$STATE_DIR/db.pass")
EOF
    )
    chmod 600 "$CONF_DIR/slurmdbd.conf"
}

# --------------------------------------------------------------------------- daemons
start_munge() {
    if pid_alive "$STATE_DIR/run/munged.pid"; then return 0; fi
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        log "using the munged that is already running (not started here, not stopped by 'stop')"
        return 0
    fi
    [[ -s /etc/munge/munge.key ]] || { /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >>"$STATE_DIR/log/munged.log" 2>&1 \
        || { cat "$STATE_DIR/log/munged.log" >&2; die "munged did not start"; }
    wait_for 20 "munged" test -s /run/munge/munged.pid || die "munged did not write its pid file"
    cp /run/munge/munged.pid "$STATE_DIR/run/munged.pid"
    wait_for 20 "munge credentials" bash -c 'munge -n | unmunge' || die "munge does not work"
}

db() { mariadb --protocol=socket -S "$DB_SOCKET" -u root "$@"; }

start_mariadb() {
    mkdir -p "$DB_RUN" && chown mysql:mysql "$DB_RUN"
    if ! pid_alive "$DB_RUN/mariadb.pid"; then
        local datadir=$STATE_DIR/mysql
        if [[ ! -d $datadir/mysql ]]; then
            log "initialising the MariaDB data directory"
            mkdir -p "$datadir" && chown mysql:mysql "$datadir"
            mariadb-install-db --user=mysql --datadir="$datadir" --auth-root-authentication-method=socket \
                >>"$STATE_DIR/log/mariadb-install.log" 2>&1 \
                || { tail -n 20 "$STATE_DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
        fi
        log "starting MariaDB (socket only)"
        # its own data directory and socket; no TCP port (slurmdbd connects over the socket)
        nohup /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$datadir" --socket="$DB_SOCKET" \
            --pid-file="$DB_RUN/mariadb.pid" --skip-networking --log-error="$DB_RUN/mariadb.log" \
            --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 --innodb-log-file-size=64M \
            </dev/null >/dev/null 2>&1 &
        wait_for 60 "MariaDB" db -e "SELECT 1" \
            || { tail -n 20 "$DB_RUN/mariadb.log" >&2 || true; die "MariaDB did not start"; }
    fi
    local pass
    pass=$(cat "$STATE_DIR/db.pass")
    db -e "CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$pass';
           ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$pass';
           GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost'; FLUSH PRIVILEGES;" \
        || die "cannot create the slurmdbd database user"
}

start_slurmdbd() {
    if ! pid_alive "$STATE_DIR/run/slurmdbd.pid"; then
        log "starting slurmdbd"
        # slurmdbd connects to "localhost", i.e. the client library's socket: this MariaDB's
        MYSQL_UNIX_PORT="$DB_SOCKET" slurmdbd || { show_logs; die "slurmdbd did not start"; }
    fi
    wait_for 60 "slurmdbd" sacctmgr -n list cluster || { show_logs; die "slurmdbd does not answer"; }
    # cluster, account and user (sacctmgr -i: no confirmation; "already exists" is fine)
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
    if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
        sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="logzbench tests" \
            organization=logzbench >/dev/null
    fi
    if ! sacctmgr -n -P list user format=user | grep -qx root; then
        sacctmgr -i add user root account="$ACCOUNT" defaultaccount="$ACCOUNT" cluster="$CLUSTER" >/dev/null
    elif ! sacctmgr -n -P list assoc user=root format=account | grep -qx "$ACCOUNT"; then
        sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
        sacctmgr -i modify user root set defaultaccount="$ACCOUNT" >/dev/null
    fi
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1 | tr -d '*~#$@^-'; }

node_ready() { [[ $(node_state) =~ ^(idle|mixed|allocated)$ ]]; }

start_slurm() {
    if ((CONF_CHANGED)) && pid_alive "$STATE_DIR/run/slurmctld.pid"; then
        log "slurm.conf changed: restarting slurmctld and slurmd"
        stop_pidfile "$STATE_DIR/run/slurmd.pid" slurmd
        stop_pidfile "$STATE_DIR/run/slurmctld.pid" slurmctld
    fi
    if ! pid_alive "$STATE_DIR/run/slurmctld.pid"; then
        log "starting slurmctld"
        slurmctld || { show_logs; die "slurmctld did not start"; }
    fi
    wait_for 60 "slurmctld" scontrol ping || { show_logs; die "slurmctld does not answer"; }
    if ! pid_alive "$STATE_DIR/run/slurmd.pid"; then
        log "starting slurmd"
        slurmd -N "$NODE" || { show_logs; die "slurmd did not start"; }
    fi
    if ! wait_for 30 "node $NODE" node_ready; then
        # a node left down/drained by an earlier run: resume it once
        log "node $NODE is '$(node_state)'; resuming it"
        scontrol update nodename="$NODE" state=resume 2>/dev/null || true
        wait_for 60 "node $NODE to become idle" node_ready \
            || { sinfo -N -l >&2 || true; show_logs; die "node $NODE is '$(node_state)', not idle"; }
    fi
}

# --------------------------------------------------------------------------- commands
cmd_start() {
    [[ $(id -u) == 0 ]] || die "run as root"
    mkdir -p "$STATE_DIR"/{run,log,slurmctld,slurmd}
    install_packages
    write_config
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurm
    # the cluster must be registered with slurmdbd (slurmctld does that when it connects)
    wait_for 60 "cluster registration" bash -c \
        "sacctmgr -n -P list cluster format=cluster,controlport | grep -q '^$CLUSTER|[1-9]'" \
        || log "warning: slurmctld has not registered with slurmdbd yet"
    log "up: partition $PARTITION, node $NODE ($(sinfo -h -n "$NODE" -o '%c CPUs, %m MB, %G') , $(node_state)); account $ACCOUNT"
}

cmd_stop() {
    if command -v squeue >/dev/null && pid_alive "$STATE_DIR/run/slurmctld.pid"; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            log "cancelling jobs: $(echo $jobs)"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            sleep 2
        fi
    fi
    stop_pidfile "$STATE_DIR/run/slurmd.pid" slurmd
    stop_pidfile "$STATE_DIR/run/slurmctld.pid" slurmctld
    stop_pidfile "$STATE_DIR/run/slurmdbd.pid" slurmdbd
    stop_pidfile "$DB_RUN/mariadb.pid" MariaDB
    stop_pidfile "$STATE_DIR/run/munged.pid" munged
    log "stopped"
}

cmd_status() {
    local rc=0 d
    for d in munged mariadb slurmdbd slurmctld slurmd; do
        local f=$STATE_DIR/run/$d.pid
        [[ $d == mariadb ]] && f=$DB_RUN/mariadb.pid
        if pid_alive "$f"; then
            echo "$d: running (pid $(cat "$f"))"
        else
            echo "$d: not running"
            rc=1
        fi
    done
    if ((rc == 0)); then
        sinfo -N -o '%N %P %T %c %m %G' || rc=1
        sacctmgr -n -P list assoc format=cluster,account,user >/dev/null 2>&1 \
            && echo "sacctmgr: ok" || { echo "sacctmgr: no answer"; rc=1; }
        node_ready || rc=1
    fi
    return $rc
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    restart) cmd_stop && cmd_start ;;
    *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
