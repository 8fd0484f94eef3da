module dlockd.local/dlock

go 1.19
