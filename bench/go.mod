module github.com/hrns-dev/hrns/bench

go 1.26.8

require github.com/hrns-dev/hrns v0.0.0

require github.com/google/jsonschema-go v0.4.3

replace github.com/hrns-dev/hrns => ../
