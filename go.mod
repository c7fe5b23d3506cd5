module github.com/hrns-dev/hrns

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
)
