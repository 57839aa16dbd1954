package redis

var GlobEscape = globEscape
