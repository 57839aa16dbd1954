package sql_test

import (
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// The fault matrix's load run: 400 waiters on one key, then 64 clients
// over 1,000 keys, fenced counters exact, history linearizable.
func TestLoadPostgres(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_POSTGRES").String())
}

// SQLite's load run (in-process: the pure-Go driver is transpiled C).
func TestLoadSQLite(t *testing.T) {
	testenv.Load(t, "sqlite://"+t.TempDir()+"/load.db")
}

// Defect 4 of the fault matrix: 400 waiters on one key, each its own
// Locker. scripts/backends' Postgres allows 300 connections: before the
// process's Lockers on one URL shared a pool and a LISTEN connection, the
// 298th Locker could not even open.
func TestLoadManyLockersPostgres(t *testing.T) {
	testenv.ManyLockers(t, testenv.URL(t, "LOCKER_TEST_POSTGRES").String(), 400)
}

func TestLoadManyLockersSQLite(t *testing.T) {
	testenv.ManyLockers(t, "sqlite://"+t.TempDir()+"/many.db", 400)
}

func TestLoadMySQL(t *testing.T) {
	testenv.Load(t, testenv.URL(t, "LOCKER_TEST_MYSQL").String())
}

func TestLoadManyLockersMySQL(t *testing.T) {
	testenv.ManyLockers(t, testenv.URL(t, "LOCKER_TEST_MYSQL").String(), 400)
}
