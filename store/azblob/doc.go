// Package azblob is the store.Store driver for Azure Blob Storage, built on
// the Azure SDK for Go (sdk/storage/azblob). Importing it registers the
// "az" URL scheme with store.Open:
//
//	az://container/prefix
//	az://ACCOUNT.blob.core.windows.net/container/prefix
//	az://container/prefix?endpoint=http://127.0.0.1:10000/devstoreaccount1&timeout=30s
//
// The second form names the account by its blob endpoint. The endpoint
// parameter (or store.Config.Endpoint) names the blob service URL of any
// account, as an emulator needs. Credentials come from, in this order: the
// connection string in AZURE_STORAGE_CONNECTION_STRING (an account key or a
// shared access signature; its BlobEndpoint, if any, is the service URL
// when none is given), an account key in AZURE_STORAGE_KEY for the account
// in AZURE_STORAGE_ACCOUNT or the URL, and azidentity's default credential
// chain (environment, workload identity, managed identity, Azure CLI).
// Opening a store sends no request.
//
// # Guarantees
//
// Blobs are block blobs. Put with IfNoneMatch sends Put Blob with
// If-None-Match: *, Put with IfMatch sends it with If-Match and the quoted
// ETag, Delete with IfMatch sends Delete Blob with If-Match. A conditional
// write is always one Put Blob of at most store.MaxConditionalSize bytes:
// its condition is checked by the request that writes the blob, never by a
// Put Block List after staged blocks. Unconditional bodies of up to 16 MiB
// go up in one Put Blob, larger ones as staged blocks of 8 MiB and a Put
// Block List. The ETag is Azure's ETag, without quotes.
//
// Attrs.ServerTime is the response's Date header, and zero when the
// response has none: the local clock is never reported as the store's.
//
// User metadata names must be C# identifiers on Azure, so names are
// escaped: a byte other than a lower case letter (or a digit after the
// first place) is stored as "_" and two hex digits, so that
// "commitptr-origin" is stored as "commitptr_2dorigin" and read back as it
// was written.
//
// # Leftovers
//
// The driver implements no store.LeftoverSweeper. A block upload that is
// interrupted leaves uncommitted blocks, which no listing shows; Azure
// discards uncommitted blocks that no Put Block List has committed within
// seven days by itself, and they count for the storage billed until then.
// Only unconditional writes of more than 16 MiB stage blocks. A sweep would
// have to commit over a blob's uncommitted blocks to remove them, which
// would fail a writer still staging; the service's own expiry needs no
// such guess.
//
// # Errors
//
// One classifier maps every SDK error, by Azure error code and by HTTP
// status, to the store error classes: 404 BlobNotFound is
// store.ErrNotExist, or store.ErrPrecondition when the request carried
// If-Match; 412 ConditionNotMet and 409 BlobAlreadyExists (Azure's answer
// to a failed If-None-Match: * on Put Blob) are store.ErrPrecondition;
// ContainerNotFound is store.ErrNoBucket and names the container; 401/403,
// the authentication and authorization codes and a credential chain that
// finds no token are store.ErrAccess. Azure has no retryable 409 for
// concurrent conditional writes, so the driver never returns
// store.ErrConflict. A service that cannot be reached gives an error naming
// the endpoint. Requests are tried three times in all (the SDK's retry
// policy, on network errors, 408 and 5xx), and ten times when the service
// throttles them (429, 503 ServerBusy). Errors never contain credentials.
package azblob
