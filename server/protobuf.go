package server

import "github.com/opemu/opemu/registry"

// Protobuf request bodies (client-go sends them for built-in kinds; kubectl for `create
// namespace`) are decoded by the kinds registry, which knows the Go types of the kinds served.
// Answers stay JSON.

const protobufType = "application/vnd.kubernetes.protobuf"

// decodeProtobuf decodes a protobuf body into the JSON object it stands for.
func (s *Server) decodeProtobuf(body []byte) (map[string]any, error) {
	raw, gvk, err := s.cfg.Kinds.DecodeProtobuf(body)
	if err != nil {
		return nil, badRequest("the body of the request is not a protobuf object this server knows: %v", err)
	}
	m, err := registry.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}
