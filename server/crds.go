package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
)

// storeRegisteredCRDs puts every CRD the registry holds (the built-in Application) into the
// store, so they list and watch like any other.
func (s *Server) storeRegisteredCRDs() error {
	for _, c := range s.cfg.CRDs.CRDs() {
		obj, err := toMap(c)
		if err != nil {
			return err
		}
		key := cache.Key{Group: crd.Resource.Group, Resource: crd.Resource.Resource, Name: c.Name}
		if _, err := s.cfg.Store.Create(context.Background(), key, obj, cache.WriteOptions{}); err != nil && !errors.Is(err, cache.ErrAlreadyExists) {
			return err
		}
	}
	return nil
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}
