package snapshot

// RestoreOptions modify a restore (the server's: app.App.Restore, POST /snapshot/restore).
type RestoreOptions struct {
	// KeepClock leaves a manual clock where it is. By default a restore into a server whose
	// clock is manual sets it to the snapshot's Clock when the snapshot was taken on a manual
	// clock too (SPEC §16): a demo reset to the moment before its failure replays the same
	// times. A real clock is never changed.
	KeepClock bool
}

// Restored says what a restore did (the answer of POST /snapshot/restore).
type Restored struct {
	// Objects is how many objects the store holds after it (the snapshot's, the server's own,
	// and the cluster's own objects the snapshot lacked, made again).
	Objects int `json:"objects"`
	// ResourceVersion is the version the restored state is at: a list carries it (or later).
	ResourceVersion string `json:"resourceVersion"`
	// Clock is the server's time after the restore (RFC 3339), and ClockRestored whether the
	// restore set it.
	Clock         string `json:"clock"`
	ClockRestored bool   `json:"clockRestored"`
}
