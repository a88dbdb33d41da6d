package refund

// CompactDialog is the read_dialog step's compaction, for tests that make
// what a crashed attempt of the step left behind.
var CompactDialog = compactDialog
