package zookeeper

// Escape exposes the key escaping to the external tests' Count.
var Escape = escape
