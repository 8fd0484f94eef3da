module github.com/dlockd/dlockd/clients/go

go 1.19
