module nodedisks.example.com/csi/toolrunner

go 1.25
