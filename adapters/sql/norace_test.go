//go:build !race

package sql_test

const raceBuild = false
