package costmodel

// Prices are the unit prices the model applies: AWS's published on-demand
// list prices in one region, without free tiers, volume tiers beyond the
// first, Savings Plans or taxes.
type Prices struct {
	// Region the prices are for.
	Region string
	// AsOf is when the prices were read from their pages (Sources), and
	// Note what else the reader should know about their date.
	AsOf, Note string

	LambdaGBSecond float64 // Lambda duration, arm64, per GB-second (first tier)
	LambdaRequest  float64 // Lambda requests, per request

	HTTPAPIRequest float64 // API Gateway HTTP API, per request (first tier), metered per 512 KB

	DynamoDBReadUnit       float64 // DynamoDB on-demand, per read request unit (Standard table class)
	DynamoDBWriteUnit      float64 // DynamoDB on-demand, per write request unit
	DynamoDBStorageGBMonth float64 // DynamoDB storage, per GB-month

	S3PutRequest     float64 // S3 Standard PUT, COPY, POST, LIST, per request
	S3GetRequest     float64 // S3 Standard GET, SELECT and the others, per request
	S3StorageGBMonth float64 // S3 Standard storage, per GB-month (first tier)

	LogsIngestGB float64 // CloudWatch Logs ingestion (Standard; Lambda's logs, first tier), per GB

	CloudFrontRequest    float64 // CloudFront HTTPS request (United States), per request
	CloudFrontFunction   float64 // CloudFront Functions invocation
	CloudFrontOutGB      float64 // CloudFront data transfer out to the internet (United States, first tier), per GB
	CloudFrontToOriginGB float64 // CloudFront data transfer out to the origin (request bodies), per GB

	SchedulerInvocation float64 // EventBridge Scheduler, per scheduled invocation

	AlarmMetricMonth float64 // CloudWatch standard-resolution alarm, per metric it evaluates, per month
	SecretMonth      float64 // Secrets Manager, per secret per month
}

// Source is a page a price comes from.
type Source struct{ Service, URL string }

// Sources are the pages of the prices in USEast1.
var Sources = []Source{
	{"AWS Lambda", "https://aws.amazon.com/lambda/pricing/"},
	{"Amazon API Gateway", "https://aws.amazon.com/api-gateway/pricing/"},
	{"Amazon DynamoDB (on-demand)", "https://aws.amazon.com/dynamodb/pricing/on-demand/"},
	{"Amazon S3", "https://aws.amazon.com/s3/pricing/"},
	{"Amazon CloudWatch (Logs, alarms)", "https://aws.amazon.com/cloudwatch/pricing/"},
	{"Amazon CloudFront", "https://aws.amazon.com/cloudfront/pricing/"},
	{"AWS Secrets Manager", "https://aws.amazon.com/secrets-manager/pricing/"},
	{"Amazon EventBridge (scheduled rules: no charge; Scheduler)", "https://aws.amazon.com/eventbridge/pricing/"},
}

// USEast1 are the us-east-1 (N. Virginia) prices the model uses.
var USEast1 = Prices{
	Region: "us-east-1",
	AsOf:   "2025-06-01",
	Note: "list prices as the pages below gave them on that date (the latest change among them: DynamoDB on-demand, " +
		"halved on 2024-11-01); make cost runs offline and does not fetch them: check them against the pages",

	LambdaGBSecond: 0.0000133334,
	LambdaRequest:  0.20 / 1e6,

	HTTPAPIRequest: 1.00 / 1e6,

	DynamoDBReadUnit:       0.125 / 1e6,
	DynamoDBWriteUnit:      0.625 / 1e6,
	DynamoDBStorageGBMonth: 0.25,

	S3PutRequest:     0.005 / 1000,
	S3GetRequest:     0.0004 / 1000,
	S3StorageGBMonth: 0.023,

	LogsIngestGB: 0.50,

	CloudFrontRequest:    0.0100 / 10000,
	CloudFrontFunction:   0.10 / 1e6,
	CloudFrontOutGB:      0.085,
	CloudFrontToOriginGB: 0.020,

	// EventBridge Scheduler's list price, $1.00 per million invocations,
	// dated 2026-11-26 (added then, from the EventBridge pricing page as
	// given to the project that day, not fetched here; the other prices'
	// date is AsOf).
	SchedulerInvocation: 1.00 / 1e6,

	AlarmMetricMonth: 0.10,
	SecretMonth:      0.40,
}

// priceLine is one price as the report prints it.
type priceLine struct {
	what  string
	usd   float64
	per   string
	scale float64 // the report prints usd*scale per scale units
}

// lines lists p for the report.
func (p Prices) lines() []priceLine {
	return []priceLine{
		{"Lambda duration (arm64)", p.LambdaGBSecond, "GB-second", 1},
		{"Lambda requests", p.LambdaRequest, "million requests", 1e6},
		{"API Gateway HTTP API requests (metered per 512 KB)", p.HTTPAPIRequest, "million requests", 1e6},
		{"DynamoDB on-demand reads", p.DynamoDBReadUnit, "million read request units", 1e6},
		{"DynamoDB on-demand writes", p.DynamoDBWriteUnit, "million write request units", 1e6},
		{"DynamoDB storage", p.DynamoDBStorageGBMonth, "GB-month", 1},
		{"S3 Standard PUT, COPY, POST, LIST", p.S3PutRequest, "1,000 requests", 1000},
		{"S3 Standard GET and others", p.S3GetRequest, "1,000 requests", 1000},
		{"S3 Standard storage", p.S3StorageGBMonth, "GB-month", 1},
		{"CloudWatch Logs ingestion", p.LogsIngestGB, "GB", 1},
		{"CloudFront HTTPS requests", p.CloudFrontRequest, "10,000 requests", 10000},
		{"CloudFront Functions", p.CloudFrontFunction, "million invocations", 1e6},
		{"CloudFront data out to the internet", p.CloudFrontOutGB, "GB", 1},
		{"CloudFront data out to the origin", p.CloudFrontToOriginGB, "GB", 1},
		{"EventBridge Scheduler invocations (dated 2026-11-26)", p.SchedulerInvocation, "million invocations", 1e6},
		{"CloudWatch alarms (standard resolution)", p.AlarmMetricMonth, "alarm metric-month", 1},
		{"Secrets Manager", p.SecretMonth, "secret-month", 1},
	}
}
