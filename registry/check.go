package registry

// Check runs on obj what the write path checks of every object it stores, without admission
// and without stamping: its apiVersion and kind against t's kind, unknown fields (refused, as
// fieldValidation=Strict refuses them), schema defaults, metadata and schema validation (a
// 422 with one cause per field). It is for objects made elsewhere that carry their
// server-owned metadata already (a snapshot's, package snapshot), so that nothing is stored
// that a client could not have stored. obj is changed by the defaults; nothing is stored.
func Check(t Target, obj map[string]any) error {
	if err := checkTypeMeta(t.Kind, obj); err != nil {
		return err
	}
	if _, err := metadata(obj); err != nil {
		return err
	}
	strict := Options{FieldValidation: "Strict"}
	if _, err := pruneAndDefault(t, obj, strict); err != nil {
		return err
	}
	_, err := validate(t, obj, nil, strict)
	return err
}
