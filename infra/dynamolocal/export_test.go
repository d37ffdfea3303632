package dynamolocal

// RewriteKeyConditions exposes rewriteKeyConditions to the external tests.
var RewriteKeyConditions = rewriteKeyConditions
