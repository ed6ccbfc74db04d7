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

// docTable is one Registry's decoded copy of swaggerdoc.json.gz, read on first use.
type docTable struct {
	once sync.Once
	docs map[string]map[string]string
}

// of returns the descriptions of the type named name (its OpenAPI name), nil when unknown.
func (d *docTable) of(name string) map[string]string {
	d.once.Do(func() { d.docs, _ = decodeSwaggerDocs(swaggerDocData) })
	return d.docs[name]
}

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
