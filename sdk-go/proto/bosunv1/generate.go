// Package bosunv1 holds the Go code of Bosun's contract, `proto/bosun/v1/handler.proto`:
// messages (protoc-gen-go) and the HandlerServer service (protoc-gen-go-grpc). The code is
// generated at build time, never checked in: run `go generate ./...` in sdk-go first.
//
// The generators are pinned as `tool` dependencies in go.mod, so every machine generates the
// same code; only `protoc` itself comes from the system (Debian's protobuf-compiler).
package bosunv1

//go:generate go build -o ../../bin/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
//go:generate protoc -I ../../../proto --plugin=protoc-gen-go=../../bin/protoc-gen-go --plugin=protoc-gen-go-grpc=../../bin/protoc-gen-go-grpc --go_out=../.. --go_opt=module=example.invalid/bosun/sdk-go --go_opt=Mbosun/v1/handler.proto=example.invalid/bosun/sdk-go/proto/bosunv1 --go-grpc_out=../.. --go-grpc_opt=module=example.invalid/bosun/sdk-go --go-grpc_opt=Mbosun/v1/handler.proto=example.invalid/bosun/sdk-go/proto/bosunv1 bosun/v1/handler.proto
