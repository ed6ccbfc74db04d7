package server

import "strconv"

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }
