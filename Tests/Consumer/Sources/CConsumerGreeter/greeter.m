#import <Foundation/Foundation.h>

#include <stdlib.h>
#include <string.h>

#include "CConsumerGreeter.h"

@interface Greeter : NSObject {
    int greetings;
}
- (int)greet:(int)times;
- (NSString *)salutation;
- (void)refuse;
@end

@implementation Greeter
- (int)greet:(int)times {
    greetings += times;
    return greetings;
}
- (NSString *)salutation { return @"hello"; }
- (void)refuse {
    [NSException raise:@"GreeterRefusal" format:@"no greeting"];
}
@end

void *greeter_new(void) { return [Greeter new]; }

int greeter_greet(void *greeter, int times) { return [(Greeter *)greeter greet:times]; }

char *greeter_description(void *object) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    char *text = strdup([[(id)object description] UTF8String]);
    [pool release];
    return text;
}

char *greeter_salutation(void *greeter) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    char *text = strdup([[(Greeter *)greeter salutation] UTF8String]);
    [pool release];
    return text;
}

void greeter_release(void *object) { [(id)object release]; }

int greeter_refusal_caught(void *greeter) {
    int caught = 0;
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    @try {
        [(Greeter *)greeter refuse];
    } @catch (NSException *exception) {
        caught = [[exception name] isEqualToString:@"GreeterRefusal"];
    }
    [pool release];
    return caught;
}
