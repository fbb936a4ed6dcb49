// Builds nodedisks-faultydisk: a FUSE file whose reads or writes fail on command (github.com/hanwen/go-fuse).
module nodedisks.test/faultydisk

go 1.26.7

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.28.0 // indirect
