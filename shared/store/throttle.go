package store

import (
	"errors"

	"github.com/aws/smithy-go"
)

// throttleCodes are the error codes DynamoDB uses for throttling that have
// no modeled exception type.
var throttleCodes = map[string]bool{
	"ThrottlingException":  true,
	"Throttling":           true,
	"ServiceUnavailable":   true,
	"InternalFailure":      true,
	"RequestThrottled":     true,
	"SlowDown":             true,
	"TooManyRequestsError": true,
}

func isThrottle(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && throttleCodes[ae.ErrorCode()]
}
