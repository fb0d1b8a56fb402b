# Shell helpers for the scripts that administer a test PostgreSQL or MariaDB and watch its
# connections (tests/cli/fleet_test.sh, tests/torture/crowd_test.sh). Sourced, after set -u:
#   server_admin postgresql|mysql URL  reads the URL with Python's parser (host, port, user,
#                                      password, database); admin runs as that user from then on
#   admin SQL                          one statement on the server itself, rows unadorned
#   limited_account NAME LIMIT         creates account NAME (password NAME-pw) with the URL
#                                      user's rights on the database and at most LIMIT
#                                      connections; sets account_url, the URL as NAME
#   drop_account NAME                  drops it, quietly (for a trap)
#   connections_of NAME                the server's sessions of account NAME now, but those of
#                                      this file (the samplers' own, when NAME is the URL's user)
#   sessions_of NAME                   the same sessions, one line each (what each is doing)
#   sample_peak NAME FILE DONE         in the background: the most sessions of NAME seen, every
#                                      50 ms, written to FILE until the file DONE exists, and
#                                      those sessions at the peak to FILE.sessions
#   sample_commit TABLE FILE DONE      in the background: the slowest commit of a one-row UPDATE
#                                      of TABLE (made here), in ms on an open session (not the
#                                      client's start), every 250 ms, written to FILE until the
#                                      file DONE exists: how long the server itself took to
#                                      commit anything meanwhile

# PostgreSQL sessions opened here carry this application_name: connections_of leaves them out.
admin_app=dblock-test-admin

server_admin() {
  admin_backend=$1
  read -r host port user password database < <(/usr/bin/python3 -c '
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(p.hostname, p.port, u.unquote(p.username), u.unquote(p.password), p.path.lstrip("/"))' "$2")
}

admin() {
  if [ "$admin_backend" = postgresql ]; then
    PGAPPNAME=$admin_app PGPASSWORD=$password psql -qtAX -h "$host" -p "$port" -U "$user" -d "$database" -v ON_ERROR_STOP=1 -c "$1"
  else
    MYSQL_PWD=$password mariadb -h "$host" -P "$port" -u "$user" "$database" -N -e "$1"
  fi
}

limited_account() {
  if [ "$admin_backend" = postgresql ]; then
    admin "CREATE ROLE $1 LOGIN PASSWORD '$1-pw' CONNECTION LIMIT $2; GRANT $user TO $1"
  else
    admin "CREATE USER '$1'@'%' IDENTIFIED BY '$1-pw' WITH MAX_USER_CONNECTIONS $2"
    admin "GRANT ALL ON \`$database\`.* TO '$1'@'%'"
  fi
  account_url="$admin_backend://$1:$1-pw@$host:$port/$database"
}

drop_account() {
  if [ "$admin_backend" = postgresql ]; then
    admin "DROP ROLE IF EXISTS $1" >/dev/null 2>&1 || true
  else
    admin "DROP USER IF EXISTS '$1'@'%'" >/dev/null 2>&1 || true
  fi
}

connections_of() {
  if [ "$admin_backend" = postgresql ]; then
    admin "SELECT count(*) FROM pg_stat_activity WHERE usename = '$1' AND application_name <> '$admin_app'"
  else
    admin "SELECT count(*) FROM information_schema.PROCESSLIST WHERE USER = '$1' AND ID <> CONNECTION_ID()"
  fi
}

sessions_of() {
  if [ "$admin_backend" = postgresql ]; then
    admin "SELECT pid, client_port, application_name, state, backend_start, left(query, 60) FROM pg_stat_activity
           WHERE usename = '$1' AND application_name <> '$admin_app' ORDER BY backend_start"
  else
    admin "SELECT ID, HOST, COMMAND, TIME, LEFT(INFO, 60) FROM information_schema.PROCESSLIST
           WHERE USER = '$1' AND ID <> CONNECTION_ID()"
  fi
}

sample_peak() {
  echo 0 >"$2"
  (
    peak=0
    while [ ! -e "$3" ]; do
      n=$(connections_of "$1" 2>/dev/null || echo 0)
      [ "$n" -gt "$peak" ] && peak=$n && echo "$peak" >"$2" && { sessions_of "$1" >"$2.sessions" 2>&1 || true; }
      sleep 0.05
    done
  ) &
}

sample_commit() {
  admin "CREATE TABLE $1 (n INT NOT NULL)" && admin "INSERT INTO $1 VALUES (0)" || return 1
  echo 0 >"$2"
  (
    slowest=0
    while [ ! -e "$3" ]; do
      if [ "$admin_backend" = postgresql ]; then  # psql's round trip on its open session
        t=$(PGAPPNAME=$admin_app PGPASSWORD=$password psql -qtAX -h "$host" -p "$port" -U "$user" -d "$database" \
              -c '\timing on' -c "UPDATE $1 SET n = n + 1" 2>/dev/null | sed -n 's/^Time: \([0-9]*\).*/\1/p')
      else  # the server's own clock, from the statement's start to the commit's end
        t=$(admin "SET @t = NOW(6); UPDATE $1 SET n = n + 1; SELECT TIMESTAMPDIFF(MICROSECOND, @t, NOW(6)) DIV 1000" 2>/dev/null)
      fi
      [ -n "$t" ] && [ "$t" -gt "$slowest" ] && slowest=$t && echo "$slowest" >"$2"
      sleep 0.25
    done
    admin "DROP TABLE $1" >/dev/null 2>&1 || true
  ) &
}
