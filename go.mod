module github.com/parley-chat/parley

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/time v0.16.0
)

require golang.org/x/sys v0.45.0 // indirect
