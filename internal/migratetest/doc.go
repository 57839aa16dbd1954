// Package migratetest holds the tests of moving between backends with
// separate processes (locker.Migration): its code is all in its tests.
package migratetest
