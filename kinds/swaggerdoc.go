package kinds

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"io"
	"sync"
)

// The descriptions of the Go types the served kinds reach, as their SwaggerDoc methods give
// them (kubectl explain's text), kept in swaggerdoc.json.gz: a map from OpenAPI name to the
// method's map ("" the type's own, the others its fields' by JSON name). The file is generated
// from the methods by TestSwaggerDocs (go test ./kinds -run TestSwaggerDocs -update), which
// also fails when it is stale. Calling the methods from the server instead would link the
// descriptions of the types reached and build them all when the process starts (the k8s.io/api
// packages initialise them as package variables): about 1 MiB of idle RSS. Embedded, they cost
// nothing until the first OpenAPI request or write of a typed kind reads them.

//go:embed swaggerdoc.json.gz
var swaggerDocData []byte

// docTable reads the descriptions of swaggerdoc.json.gz.
type docTable struct{}

// of returns the descriptions of the type named name (its OpenAPI name), nil when unknown.
// The map is shared: read it, never change it.
func (docTable) of(name string) map[string]string {
	return decodedSwaggerDocs()[name]
}

// decodedSwaggerDocs is swaggerdoc.json.gz decoded, on first use. Every Registry of the
// process reads the same copy: it is constant (the embedded file), so sharing it leaves each
// server's state its own, while a process running many servers (testenv's parallel tests)
// decodes it once instead of once per server (about 3 ms of CPU and the table's memory each).
var decodedSwaggerDocs = sync.OnceValue(func() map[string]map[string]string {
	docs, _ := decodeSwaggerDocs(swaggerDocData)
	return docs
})

func decodeSwaggerDocs(data []byte) (map[string]map[string]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var docs map[string]map[string]string
	return docs, json.Unmarshal(raw, &docs)
}
