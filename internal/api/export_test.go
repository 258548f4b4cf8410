package api

// RejectedPerKey is rejectedPerKey, for the tests of package api_test.
const RejectedPerKey = rejectedPerKey
