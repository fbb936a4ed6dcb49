module nodedisks.example.com/bench/spawnhelper

go 1.25
