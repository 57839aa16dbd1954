//go:build !race

package zookeeper_test

const raceBuild = false
