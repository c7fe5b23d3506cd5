package userdata

// ZipEntries is zipEntries, for the tests.
var ZipEntries = zipEntries
